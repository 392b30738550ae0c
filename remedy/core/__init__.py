"""The vocabulary every room speaks: the models, the action table, errors, durations and
numbering, safe YAML, Event reasons, exactly-once, hang-proof threads."""
