"""Who may say what: signed operator decisions, an agent's identity, a node held for a person,
the requests people send a ladder."""
