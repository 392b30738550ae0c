"""A node's remediation: its state and outcome, the door a report passes, approvals,
verification, recurrence, what it shows people, the hardware record."""
