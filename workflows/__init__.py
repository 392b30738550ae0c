"""Deterministic Temporal workflows only; side effects live in activities/."""
