"""What fails in a training fleet, how often, what remedy would see, and what really fixes it.

Counts: Llama 3 pre-training, 54 days on 2,048 nodes × 8 H100, 419 unexpected interruptions
(The Llama 3 Herd of Models, Table 5; ../shared/reference/gpu-faults.md). Each cause is played
by the simulated faults of ``adapters.sim`` whose signals and fixes are closest: the fault decides
the finding an agent reports (so the runbook that matches) and which action really clears it.
A cause with no node signal (silent data corruption, NCCL timeouts without a finding) interrupts
the job and leaves remedy nothing to act on."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field, model_validator

LLAMA3_DAYS = 54
LLAMA3_NODES = 2048


class Variant(BaseModel):
    """One way a cause shows up: the simulated fault (None: no node signal), its share, and
    whether it is gone by itself before the first re-probe (a transient)."""

    fault: str | None
    share: float = Field(gt=0, le=1)
    transient: bool = False


class Cause(BaseModel):
    name: str
    count: int = Field(ge=0)  # events over the reference period on the reference fleet
    variants: list[Variant]
    interrupts_job: bool = True
    note: str = ""

    @model_validator(mode="after")
    def _shares_add_up(self) -> Cause:
        if abs(sum(v.share for v in self.variants) - 1.0) > 1e-9:
            raise ValueError(f"{self.name}: variant shares must add up to 1")
        return self


def _one(fault: str | None) -> list[Variant]:
    return [Variant(fault=fault, share=1.0)]


LLAMA3_CAUSES: list[Cause] = [
    Cause(
        name="faulty GPU",
        count=148,
        variants=[
            Variant(fault="gpu_lost", share=0.45),
            Variant(fault="mcu_halt", share=0.40),
            Variant(fault="gpu_hang", share=0.15),
        ],
        note="fell off the bus (reboot), micro-controller halt (reset), wedged (reboot)",
    ),
    Cause(
        name="GPU HBM3 memory",
        count=72,
        variants=[Variant(fault="ecc_dbe", share=0.85), Variant(fault="remap_failure", share=0.15)],
        note="uncorrectable ECC (reset applies the remap); no spare rows left (replace)",
    ),
    Cause(
        name="software bug",
        count=54,
        variants=_one("app_xid"),
        note="the job's own code (Xid 13): nothing wrong with the node",
    ),
    Cause(
        name="network switch/cable",
        count=35,
        variants=_one("nic_down"),
        note="an RDMA port down; played as a NIC a reboot retrains",
    ),
    Cause(
        name="host maintenance",
        count=32,
        variants=_one("gpu_hang"),
        note="an unplanned host event; played as a wedged node a reboot clears",
    ),
    Cause(
        name="GPU SRAM memory",
        count=19,
        variants=_one("ecc_dbe"),
        note="contained SRAM errors: a reset",
    ),
    Cause(
        name="GPU system processor (GSP)",
        count=17,
        variants=_one("gpu_hang"),
        note="GSP timeouts: a reboot",
    ),
    Cause(name="NIC", count=7, variants=_one("nic_down")),
    Cause(
        name="NCCL watchdog timeouts",
        count=7,
        variants=_one(None),
        note="no node signal: the job restarts, remedy has nothing to act on",
    ),
    Cause(
        name="silent data corruption",
        count=6,
        variants=_one(None),
        note="not seen by any probe: the job restarts from a checkpoint",
    ),
    Cause(
        name="GPU thermal interface + sensor",
        count=6,
        variants=_one("thermal_transient"),
        note="a throttling GPU; played by the thermal fault (a reset clears it)",
    ),
    Cause(
        name="SSD",
        count=3,
        variants=_one("remap_failure"),
        note="host hardware only new hardware fixes; played by a replace-only fault",
    ),
    Cause(name="power supply", count=3, variants=_one("remap_failure")),
    Cause(name="server chassis", count=2, variants=_one("remap_failure")),
    Cause(name="IO expansion board", count=2, variants=_one("remap_failure")),
    Cause(name="dependency", count=2, variants=_one(None)),
    Cause(name="CPU", count=2, variants=_one("remap_failure")),
    Cause(name="system memory", count=2, variants=_one("remap_failure")),
]

# Not among the 419 interruptions: faults that pass by themselves and never stop the job.
TRANSIENTS = Cause(
    name="transient thermal slowdown",
    count=120,
    variants=[Variant(fault="thermal_transient", share=1.0, transient=True)],
    interrupts_job=False,
    note="clears within its tolerance window; the job only slows",
)


def rate_per_node_day(cause: Cause) -> float:
    return cause.count / (LLAMA3_DAYS * LLAMA3_NODES)


def expected_count(cause: Cause, nodes: int, duration: timedelta) -> float:
    """How many events of ``cause`` a fleet of ``nodes`` sees over ``duration``."""
    return rate_per_node_day(cause) * nodes * duration / timedelta(days=1)
