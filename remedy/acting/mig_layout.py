"""A MIG node's layout after a GPU reset or a reboot: both destroy every MIG instance, and
NVIDIA's MIG manager creates them again from the layout the node label ``nvidia.com/mig.config``
names, reporting in ``nvidia.com/mig.config.state`` (``pending`` while it applies, then
``success`` or ``failed``). The MIG manager applies it when it starts: after a reboot, and
after a reset when it was one of the GPU operator's pods that stepped aside for it.

So that the manager's ``success`` from before the action is never read as the answer, remedy
marks the state ``pending`` just before the action (and puts back what it was if the action
did not run), then waits for the manager's own answer. Fail closed: ``failed``, or a layout
label gone or changed meanwhile, is not a recovery."""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from remedy.core.models import Frozen, NodeRef

MIG_CONFIG = "nvidia.com/mig.config"
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
NO_MIG = "all-disabled"  # the MIG manager's layout with MIG off: no instances to restore


class MigState(StrEnum):
    PENDING = "pending"
    SUCCESS = "success"
    FAILED = "failed"


class MigLayout(Frozen):
    config: str = ""  # the layout's name ("" : no MIG manager layout on the node)
    state: str = ""  # what the MIG manager last reported

    @property
    def has_instances(self) -> bool:
        """A layout that creates MIG instances, which a reset or a reboot destroys."""
        return bool(self.config) and self.config != NO_MIG


class MigLayoutStep(Frozen):
    """One step around a reset or a reboot; ``before``: the layout the step began with."""

    node: NodeRef
    before: MigLayout = MigLayout()


def restored(before: MigLayout, now: MigLayout) -> tuple[bool | None, str]:
    """Whether the layout ``before`` is back: True, False (it will not be: fail closed), or
    None (not yet), with what to say. For example, before ``all-3g.71gb``: now ``success``
    → True; ``pending`` → None; ``failed`` → False; the label removed → False.

    >>> b = MigLayout(config="all-3g.71gb", state="success")
    >>> [restored(b, MigLayout(config="all-3g.71gb", state=s))[0]
    ...  for s in ("success", "pending", "failed")]
    [True, None, False]
    >>> restored(b, MigLayout(state="success"))
    (False, 'the MIG layout all-3g.71gb is gone from the node (nvidia.com/mig.config removed)')
    """
    name = before.config
    if not now.config:
        return False, f"the MIG layout {name} is gone from the node ({MIG_CONFIG} removed)"
    if now.config != name:
        return False, f"the MIG layout changed from {name} to {now.config} meanwhile"
    if now.state == MigState.SUCCESS:
        return True, f"MIG layout {name} applied again"
    if now.state == MigState.FAILED:
        return False, f"the MIG manager failed to apply layout {name} ({MIG_CONFIG_STATE})"
    return None, f"MIG layout {name}: {now.state or 'no state reported'}"


class MigLayouts(Protocol):
    """The cluster side of a MIG node's layout (the MIG manager's node labels)."""

    def ask_layout(self, node: str) -> MigLayout:
        """The layout as it was; one with instances is marked pending (the action about to
        run destroys them). Idempotent: a retry finds it pending and leaves it."""
        ...

    def layout(self, node: str) -> MigLayout: ...

    def keep_layout(self, node: str, before: MigLayout) -> None:
        """The action did not run: put back the state ``before`` had, if it is still the
        pending remedy set (the MIG manager's own answer since is left alone)."""
        ...
