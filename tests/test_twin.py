"""The fleet twin: the failure generator reproduces its rates, a seed is one history, the job
model charges what it should, and the ladders it uses come from the real workflow."""

from __future__ import annotations

import math
from collections import Counter
from datetime import timedelta

import pytest

from adapters.sim import FAULTS
from remedy.core.models import Action
from remedy.ladder.remediation import AttemptResult
from remedy.runbook import Match, Runbook, RunbookSet, Rung
from twin.causes import LLAMA3_CAUSES, TRANSIENTS, expected_count
from twin.checkpoint import lost_fraction, young_daly
from twin.generator import FaultEvent, FaultKind, generate
from twin.job import ActionCosts, JobConfig, LadderRun, Policy, Step, simulate
from twin.ladders import ORACLE, ladders_for, oracle_ladders, policies
from twin.population import CRASH_LOOP, RESTART_CAP, Job, PopulationConfig, outcome, sample_jobs

CAUSES = [*LLAMA3_CAUSES, TRANSIENTS]
MIN = timedelta(minutes=1)
AUTOMATED = Policy(name="automated", detect=timedelta(seconds=30), approval_delay=timedelta(0))


def test_llama3_table_adds_up_to_its_419_interruptions() -> None:
    assert sum(c.count for c in LLAMA3_CAUSES) == 419
    per_1000_node_days = 1000 * 419 / (54 * 2048)
    assert per_1000_node_days == pytest.approx(3.8, abs=0.05)  # the reference's own figure


def test_generator_reproduces_each_cause_rate_within_poisson_tolerance() -> None:
    nodes, duration = 2048, timedelta(days=54 * 20)  # 20 Llama 3 runs: ~8,400 events
    events = generate(CAUSES, nodes, duration, seed=11)
    counts = Counter(e.cause for e in events)
    for cause in CAUSES:
        mean = expected_count(cause, nodes, duration)
        assert abs(counts[cause.name] - mean) <= 4 * math.sqrt(mean) + 1, cause.name
    gpu = [e.fault for e in events if e.cause == "faulty GPU"]
    assert gpu.count("gpu_lost") / len(gpu) == pytest.approx(0.45, abs=0.04)
    assert all(timedelta(0) <= e.at < duration and 0 <= e.node < nodes for e in events)
    assert [e.at for e in events] == sorted(e.at for e in events)
    # Arrivals are spread evenly over the period (Poisson): each half holds about half.
    first_half = sum(e.at < duration / 2 for e in events)
    assert first_half / len(events) == pytest.approx(0.5, abs=0.02)


def test_a_seed_is_one_history_and_the_twin_is_deterministic() -> None:
    duration = timedelta(days=54)
    one, again, other = (generate(CAUSES, 2080, duration, seed) for seed in (7, 7, 8))
    assert one == again and one != other
    ladders = {kind: _ladder(kind) for kind in {e.kind for e in one}}
    job = JobConfig()
    assert simulate(one, ladders, AUTOMATED, job, ActionCosts()) == simulate(
        again, ladders, AUTOMATED, job, ActionCosts()
    )


def _ladder(kind: FaultKind) -> LadderRun:
    fault, _ = kind
    if fault is None:
        return LadderRun(
            fault=None, runbook="-", outcome="not seen", steps=[], workflow_time=timedelta(0)
        )
    return LadderRun(
        fault=fault,
        runbook="r",
        outcome="recovered",
        workflow_time=MIN,
        steps=[_step(Action.CORDON, -1), _step(Action.REBOOT, 0)],
    )


def _step(action: Action, rung: int, approval: bool = False) -> Step:
    return Step(action=action, result="done", rung=rung, took=timedelta(0), approval=approval)


def _event(minutes: float, node: int, fault: str | None, interrupts: bool = True) -> FaultEvent:
    return FaultEvent(
        at=timedelta(minutes=minutes), node=node, cause="c", fault=fault, interrupts_job=interrupts
    )


JOB = JobConfig(
    nodes=4,
    spares=1,
    days=1,
    checkpoint_interval=timedelta(minutes=15),
    checkpoint_cost=timedelta(seconds=30),
    restart=timedelta(minutes=5),
)


def test_an_interruption_costs_the_work_since_the_checkpoint_and_a_restart() -> None:
    ladders = {(None, False): _ladder((None, False))}
    result = simulate([_event(60, 0, None)], ladders, AUTOMATED, JOB, ActionCosts())
    assert result.interruptions == 1
    assert result.lost_work == timedelta(minutes=13.5)  # 60 min = 3 cycles of 15.5 + 13.5
    assert result.job_down == timedelta(minutes=5)  # nothing to take out: a restart only
    assert result.availability == 1.0 and result.repairs == 0


def test_a_bad_node_is_swapped_for_a_spare_and_repaired() -> None:
    ladders = {("gpu_lost", False): _ladder(("gpu_lost", False))}
    result = simulate([_event(60, 2, "gpu_lost")], ladders, AUTOMATED, JOB, ActionCosts())
    # detect 30 s, then the restart on the spare
    assert result.job_down == timedelta(minutes=5, seconds=30)
    assert result.waiting_for_spares == timedelta(0)
    # out for the ladder (1 min) and the reboot it ran (15 min)
    assert result.mttr == timedelta(minutes=16) and result.repairs == 1
    assert result.availability == pytest.approx(1 - 16 / (24 * 60 * 5))


def test_with_no_spare_left_the_job_waits_for_a_repair() -> None:
    ladders = {("gpu_lost", False): _ladder(("gpu_lost", False))}
    events = [_event(60, 0, "gpu_lost"), _event(120, 1, "gpu_lost")]
    result = simulate(events, ladders, AUTOMATED, JOB, ActionCosts())
    # The first took the only spare (back in repair until 76 min, then the spare again);
    # the second at 120 min finds it: no wait. Now a second failure 5 min after the first:
    close = [_event(60, 0, "gpu_lost"), _event(66, 1, "gpu_lost")]
    tight = simulate(close, ladders, AUTOMATED, JOB, ActionCosts())
    assert result.waiting_for_spares == timedelta(0)
    # node 0 is back at 60 + 16 = 76 min; the second needs a node from 66.5 min: 9.5 min wait
    assert tight.waiting_for_spares == timedelta(minutes=9.5)
    assert tight.interruptions == 2


def test_a_cordon_alone_leaves_the_job_running_and_a_needless_replace_is_counted() -> None:
    cleared = LadderRun(
        fault="thermal_transient",
        runbook="thermal",
        outcome="cleared",
        workflow_time=10 * MIN,
        steps=[_step(Action.CORDON, -1), _step(Action.RESTORE, -1)],
    )
    replaced = LadderRun(
        fault="ecc_dbe",
        runbook="any",
        outcome="replaced",
        workflow_time=timedelta(0),
        steps=[_step(Action.DRAIN, 0), _step(Action.REPLACE, 1)],
    )
    ladders = {("thermal_transient", True): cleared, ("ecc_dbe", False): replaced}
    events = [
        FaultEvent(
            at=30 * MIN,
            node=0,
            cause="t",
            fault="thermal_transient",
            transient=True,
            interrupts_job=False,
        ),
        _event(300, 1, "ecc_dbe"),
    ]
    result = simulate(events, ladders, AUTOMATED, JOB, ActionCosts())
    assert result.interruptions == 1  # the transient's cordon did not stop the job
    assert result.replacements == 1 and result.needless_replacements == 1  # a reset would do
    assert result.mttr == (10 * MIN + ActionCosts().drain + ActionCosts().replace) / 2


@pytest.mark.server  # the ladders run on a time-skipping server
async def test_the_ladders_come_from_the_real_workflow(shipped_runbooks: RunbookSet) -> None:
    [(remedy, choose), *_] = policies(
        shipped_runbooks,
        detect=timedelta(seconds=30),
        approval=timedelta(hours=1),
        manual_detect=timedelta(hours=1),
        manual_step=timedelta(hours=2),
    )
    kinds: set[FaultKind] = {("ecc_dbe", False), ("thermal_transient", True), (None, False)}
    ladders = await ladders_for(kinds, choose)
    ecc = ladders[("ecc_dbe", False)]
    assert remedy.name == "remedy"
    assert (ecc.runbook, ecc.outcome) == ("gpu-memory-ecc", "recovered")
    assert [s.action for s in ecc.steps if s.rung >= 0] == [Action.DRAIN, Action.RESET_GPU]
    transient = ladders[("thermal_transient", True)]
    assert (transient.runbook, transient.outcome) == ("thermal", "cleared")
    assert not transient.disruptive and transient.workflow_time >= timedelta(minutes=1)
    assert ladders[(None, False)].outcome == "not seen"


def test_a_recovery_that_left_its_fault_behind_is_counted_false() -> None:
    recovered = _ladder(("mcu_halt", False))
    false = recovered.model_copy(update={"fault_left": True})
    events = [_event(60, 0, "mcu_halt"), _event(600, 1, "mcu_halt")]
    honest = simulate(events, {("mcu_halt", False): recovered}, AUTOMATED, JOB, ActionCosts())
    fooled = simulate(events, {("mcu_halt", False): false}, AUTOMATED, JOB, ActionCosts())
    assert honest.false_recoveries == 0 and fooled.false_recoveries == 2


@pytest.mark.server  # the ladders run on a time-skipping server
async def test_no_ladder_declares_a_recovery_its_fault_survived(
    shipped_runbooks: RunbookSet,
) -> None:
    # Killing the job cannot fix a halted micro-controller (Xid 62), and the probe cannot see
    # it: the kill must not pass as the recovery.
    kill_first = Runbook(
        name="kill-first",
        match=[Match(xids=[62])],
        ladder=[Rung(action=Action.KILL_JOB), Rung(action=Action.RESET_GPU)],
    )
    [run] = (await ladders_for({("mcu_halt", False)}, lambda _: kill_first)).values()
    assert run.outcome == "recovered" and not run.false_recovery
    climbed = [(s.action, s.result) for s in run.steps if s.rung >= 0]
    assert climbed == [
        (Action.KILL_JOB, AttemptResult.UNVERIFIED.value),
        (Action.RESET_GPU, AttemptResult.VERIFIED.value),
    ]
    # remedy's shipped runbooks, every simulated fault that stays: none recovered falsely.
    [(remedy, choose), *_] = policies(
        shipped_runbooks,
        detect=timedelta(seconds=30),
        approval=timedelta(hours=1),
        manual_detect=timedelta(hours=1),
        manual_step=timedelta(hours=2),
    )
    kinds: set[FaultKind] = {(f, False) for f, spec in FAULTS.items() if not spec.passes}
    ladders = await ladders_for(kinds, choose)
    assert not [kind for kind, run in ladders.items() if run.false_recovery]
    assert any(run.outcome == "recovered" for run in ladders.values())


def test_the_oracle_bounds_every_policy_on_the_same_history() -> None:
    events = generate(CAUSES, 2080, timedelta(days=54), seed=7)
    kinds = {e.kind for e in events}
    automated = {kind: _ladder(kind) for kind in kinds}
    slow = Policy(name="slow", detect=timedelta(hours=1), approval_delay=timedelta(hours=2))
    oracle = simulate(events, oracle_ladders(kinds), ORACLE, JobConfig(), ActionCosts())
    for policy in (AUTOMATED, slow):
        result = simulate(events, automated, policy, JobConfig(), ActionCosts())
        assert result.goodput < oracle.goodput, policy.name
    assert oracle.mttr == timedelta(0) and oracle.availability == 1.0
    assert oracle.false_recoveries == oracle.replacements == 0


def test_a_false_recovery_comes_back_and_costs_another_interruption() -> None:
    fixed = LadderRun(
        fault="mcu_halt", runbook="m", outcome="recovered", steps=[], workflow_time=MIN
    )
    fooled = fixed.model_copy(update={"outcome": "cleared", "fault_left": True})
    events = [_event(60, 0, "mcu_halt")]
    honest = simulate(events, {("mcu_halt", False): fixed}, AUTOMATED, JOB, ActionCosts())
    again = simulate(events, {("mcu_halt", False): fooled}, AUTOMATED, JOB, ActionCosts())
    assert (honest.interruptions, honest.false_recoveries, honest.comebacks) == (1, 0, 0)
    # Cleared with the fault still there: it comes back (mcu_halt's mean is 30 min, a day is
    # plenty), stops the job once more, and a person takes the node out and fixes it for real.
    assert (again.interruptions, again.false_recoveries, again.comebacks) == (2, 1, 1)
    assert again.repairs == 1 and again.lost_work > honest.lost_work


def test_young_daly_interval_minimises_the_lost_time() -> None:
    cost, mtbf = timedelta(seconds=30), timedelta(hours=3)
    best = young_daly(cost, mtbf)
    assert best.total_seconds() == pytest.approx(math.sqrt(2 * 30 * 3 * 3600))  # ≈ 13.4 min
    at_best = lost_fraction(best, cost, mtbf, restart=5 * MIN)
    for other in (best * 0.5, best * 0.8, best * 1.25, best * 2):
        assert lost_fraction(other, cost, mtbf, restart=5 * MIN) > at_best


def test_an_elastic_job_carries_on_smaller_instead_of_waiting() -> None:
    ladders = {("gpu_lost", False): _ladder(("gpu_lost", False))}
    events = [_event(60, 0, "gpu_lost")]
    no_spare = JOB.model_copy(update={"spares": 0})
    rigid = simulate(events, ladders, AUTOMATED, no_spare, ActionCosts())
    elastic = simulate(
        events, ladders, AUTOMATED, no_spare.model_copy(update={"elastic_min": 3}), ActionCosts()
    )
    assert rigid.waiting_for_spares > timedelta(0) and elastic.waiting_for_spares == timedelta(0)
    # Three nodes from the restart until node 0 is back (60 min + 16), then a restart to grow.
    assert elastic.short_node_time == timedelta(minutes=16) - timedelta(seconds=30)
    assert elastic.job_down == rigid.job_down - rigid.waiting_for_spares + JOB.restart
    assert elastic.goodput > rigid.goodput


def test_a_coordinated_drain_loses_no_work() -> None:
    drain = LadderRun(
        fault="pcie_degraded",
        runbook="pcie",
        outcome="recovered",
        workflow_time=MIN,
        steps=[_step(Action.CORDON, -1), _step(Action.DRAIN, 0), _step(Action.REBOOT, 1)],
    )
    events = [_event(60, 0, "pcie_degraded", interrupts=False)]  # the job runs through it
    ladders = {("pcie_degraded", False): drain}
    plain = simulate(events, ladders, AUTOMATED, JOB, ActionCosts())
    coordinated = JOB.model_copy(update={"coordinated_drains": True})
    waited = simulate(events, ladders, AUTOMATED, coordinated, ActionCosts())
    assert plain.interruptions == waited.interruptions == 1
    assert plain.lost_work == timedelta(minutes=13.5) and waited.lost_work == timedelta(0)


def test_a_bad_node_left_in_service_fails_the_job_and_a_cap_ends_long_ones() -> None:
    config = PopulationConfig(crash_loop=timedelta(minutes=40), max_restarts=2)
    ladders = {("gpu_lost", False): _ladder(("gpu_lost", False))}
    one = Job(nodes=4, length=timedelta(days=1), events=[_event(60, 0, "gpu_lost")])
    slow = Policy(name="slow", detect=timedelta(hours=1), approval_delay=timedelta(0))
    assert outcome(one, ladders, AUTOMATED, config) == (None, 1)
    assert outcome(one, ladders, slow, config) == (CRASH_LOOP, 1)
    many = one.model_copy(update={"events": [_event(60 * i, i % 4, "gpu_lost") for i in (1, 2, 3)]})
    assert outcome(many, ladders, AUTOMATED, config) == (RESTART_CAP, 3)
    # Cleared while the fault stays: the node is never taken out, every restart lands there.
    cleared = LadderRun(
        fault="mcu_halt",
        runbook="m",
        outcome="cleared",
        steps=[],
        workflow_time=MIN,
        fault_left=True,
    )
    halt = Job(nodes=1, length=timedelta(days=1), events=[_event(60, 0, "mcu_halt")])
    assert outcome(halt, {("mcu_halt", False): cleared}, AUTOMATED, config)[0] == CRASH_LOOP
    jobs = sample_jobs(CAUSES, PopulationConfig(jobs=200, seed=3))
    assert jobs == sample_jobs(CAUSES, PopulationConfig(jobs=200, seed=3))  # one seed, one set
    assert {j.nodes for j in jobs} >= {1, 2, 4} and all(
        j.length >= timedelta(hours=1) for j in jobs
    )
