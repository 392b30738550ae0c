"""Dependency checks and what they let a node do: the model behind `remedy doctor`, the agent's
`RemedyReady` condition, and a ladder that skips a rung its node cannot perform.

A check says whether one thing remedy relies on is there (NVML, the reset tool, the reboot
path, the load-test engine, the kernel log, the NIC expectations) and which abilities it
enables. ``capabilities_from`` turns the checks into what the node can and cannot do, with the
reason for each thing it cannot. Pure: the checks themselves run in adapters/host.

Worked example: with no ``--allow-reset`` the ``reset_tool`` check fails and enables
``reset_gpu``; ``capabilities_from`` answers ``why_not(Action.RESET_GPU)`` =
"reset_tool: GPU resets are not allowed (--allow-reset)", and a ladder's reset rung is skipped
with that reason instead of running and failing.
"""

from __future__ import annotations

from enum import StrEnum

from remedy.core.actions import ACTIONS, Where
from remedy.core.models import Action, Frozen


class Ability(StrEnum):
    """What a dependency enables on the node. The node-local actions are named as in the action
    table (a test keeps every ``Where.NODE`` action here); the rest are what the probe sees."""

    PROBE = "probe"  # see the GPUs through NVML: every verification after a rung
    KERNEL_LOG = "kernel_log"  # Xids from the kernel log, beside NVML's own events
    NIC_CHECK = "nic_check"  # RDMA NIC count and link state against expectations
    DIAGNOSE = Action.DIAGNOSE.value
    RESET_GPU = Action.RESET_GPU.value
    REBOOT = Action.REBOOT.value


class Dependency(StrEnum):
    NVML = "nvml"
    RESET_TOOL = "reset_tool"
    REBOOT_PATH = "reboot_path"
    LOAD_TEST = "load_test"
    KERNEL_LOG = "kernel_log"
    NIC_CONFIG = "nic_config"


# What each dependency enables, and whether checking it may spawn a process (the agent checks
# those at start and every few minutes, the rest with every probe): the reboot path, DCGM's host
# engine, and the kernel log (the journal is asked; the probe reports a log it cannot read
# meanwhile, as KernelLogUnreadable).
ENABLES: dict[Dependency, tuple[Ability, ...]] = {
    Dependency.NVML: (Ability.PROBE,),
    Dependency.RESET_TOOL: (Ability.RESET_GPU,),
    Dependency.REBOOT_PATH: (Ability.REBOOT,),
    Dependency.LOAD_TEST: (Ability.DIAGNOSE,),
    Dependency.KERNEL_LOG: (Ability.KERNEL_LOG,),
    Dependency.NIC_CONFIG: (Ability.NIC_CHECK,),
}
EXPENSIVE = frozenset({Dependency.REBOOT_PATH, Dependency.LOAD_TEST, Dependency.KERNEL_LOG})


class DependencyCheck(Frozen):
    """One thing remedy relies on, as found on the node. Plain strings on the wire: a newer
    agent's new dependency must not break an older controller reading it."""

    name: str
    ok: bool
    detail: str  # what was found, or what is missing and how to fix it
    enables: list[str] = []

    @classmethod
    def of(cls, dependency: Dependency, ok: bool, detail: str) -> DependencyCheck:
        return cls(name=dependency, ok=ok, detail=detail, enables=list(ENABLES[dependency]))

    def line(self) -> str:
        """One line for `remedy doctor` and the agent's log: a missing one says what it costs."""
        if self.ok:
            return f"{'ok':<8} {self.name:<12} {self.detail}"
        cost = f" (so no {', '.join(self.enables)})" if self.enables else ""
        return f"{'MISSING':<8} {self.name:<12} {self.detail}{cost}"


class Capabilities(Frozen):
    """What a node can do, from its checks; ``cannot`` says why for each thing it cannot."""

    checks: list[DependencyCheck] = []
    cannot: dict[str, str] = {}  # ability → why the node lacks it

    @property
    def ready(self) -> bool:
        """Every dependency is there: nothing remedy does on this node is a silent no-op."""
        return all(c.ok for c in self.checks)

    @property
    def missing(self) -> list[DependencyCheck]:
        return [c for c in self.checks if not c.ok]

    def why_not(self, action: Action) -> str | None:
        """Why the node cannot perform ``action``; None when it can (or it is not the node's:
        cordon, drain and the like are the controller's)."""
        if ACTIONS[action].where is not Where.NODE:
            return None
        return self.cannot.get(action.value)

    def summary(self) -> str:
        """One line: what is missing, or that nothing is."""
        if self.ready:
            return f"all {len(self.checks)} dependencies present"
        return "; ".join(f"{c.name}: {c.detail}" for c in self.missing)


def capabilities_from(checks: list[DependencyCheck]) -> Capabilities:
    """Every ability a failed check enables is one the node lacks, for that check's reason (all
    of them, when several checks enable it)."""
    reasons: dict[str, list[str]] = {}
    for check in checks:
        if not check.ok:
            for ability in check.enables:
                reasons.setdefault(ability, []).append(f"{check.name}: {check.detail}")
    return Capabilities(
        checks=checks, cannot={ability: "; ".join(why) for ability, why in reasons.items()}
    )
