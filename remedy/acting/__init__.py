"""What remedy can do to a node beyond the action table (remedy/core/actions.py): GPU-scoped
rungs and the GPU use they act on, MIG layouts, the dependencies each action needs."""
