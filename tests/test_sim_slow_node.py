"""The simulator's slow node (issue 55): a node whose ranks compute 5–50 % slower with no other
signal. The probe sees nothing; the load test sees a visible one under its model's reference
(SlowGpu, the proof) and a host-side one not at all; an intermittent one only in its slow
phase; what the fault table says clears it makes it fast again. The job's pods print each
rank's step times (adapters/sim/ranks.py), the slow node's ranks the factor slower."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta

import pytest

from adapters.sim.faults import FAULTS
from adapters.sim.ranks import COMPUTE_S, DATA_S, TAIL, rank_lines
from remedy.attribution.guard import JobRef
from remedy.core.models import Action
from remedy.detection.probe.diagnose import deep_diagnose
from remedy.detection.probe.load import LOAD_CHECK, LoadReason
from remedy.detection.stragglers.models import SLOW_NODE, STRAGGLERS
from remedy.scan import job_symptoms
from workers.providers.sim import SimProvider, SimSettings

T0 = datetime(2026, 3, 1, tzinfo=UTC)
JOB = JobRef(namespace="ml", name="llm")
SLOW_KINDS = [k for k, spec in FAULTS.items() if spec.slow is not None]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _sim(nodes: int = 8) -> tuple[SimProvider, Clock]:
    """A fleet on a clock the test moves; a probe check on a loaded machine has time."""
    clock = Clock()
    return SimProvider(SimSettings(nodes=nodes, check_timeout_s=60), clock=clock), clock


def _load_findings(provider: SimProvider, node: str) -> list[tuple[str, int | None]]:
    host = provider.fleet.host(node)
    report = deep_diagnose(host, [], host.probe_config)
    return [(f.reason, f.component.index) for f in report.findings]


def _lines(provider: SimProvider, job: JobRef = JOB) -> list[dict[str, object]]:
    """Every line the job's newest run's pods print now (through job_times once Progress reads
    rank reports, issue 55's helper D)."""
    jobs = provider.jobs
    run = jobs.runs[str(job)][-1]
    now = provider.fleet.clock()
    return [
        line
        for place, node in enumerate(run.nodes)
        for line in rank_lines(
            str(job), node, place, 8, run.started_at, now, jobs.pace, jobs.checkpoint_every
        )
    ]


def _compute(lines: list[dict[str, object]], ranks: range) -> float:
    return statistics.median(float(str(x["compute_s"])) for x in lines if x["rank"] in ranks)


@pytest.mark.parametrize("kind", SLOW_KINDS)
def test_a_slow_node_gives_no_other_signal(kind: str) -> None:
    """No Xid, no failed probe check, no degraded link: the agent has nothing to report, and
    the finding the table names is the job guard's."""
    provider, _ = _sim()
    node = sorted(provider.fleet.nodes)[0]
    finding = provider.fleet.inject(node, kind, gpu=3)
    assert (finding.check, finding.reason, finding.xid) == (STRAGGLERS.check, SLOW_NODE, None)
    host = provider.fleet.host(node)
    report = deep_diagnose(host, [], host.probe_config)
    assert [f for f in report.findings if f.check != LOAD_CHECK] == []
    assert provider.fleet.node(node).xids_since(T0) == []


def test_the_load_test_proves_a_visible_slow_node_and_cannot_see_a_hidden_one() -> None:
    provider, _ = _sim()
    visible, hidden, one_gpu, small, healthy = sorted(provider.fleet.nodes)[:5]
    provider.fleet.inject(visible, "slow_node", slowdown=0.25)
    provider.fleet.inject(hidden, "slow_node_hidden", slowdown=0.25)
    provider.fleet.inject(one_gpu, "slow_gpu", gpu=5, slowdown=0.3)
    provider.fleet.inject(small, "slow_node", slowdown=0.05)  # too small for the reference
    slow_gpu = LoadReason.SLOW_GPU.value
    assert _load_findings(provider, visible) == [(slow_gpu, g) for g in range(8)]
    assert _load_findings(provider, hidden) == []
    assert _load_findings(provider, one_gpu) == [(slow_gpu, 5)]
    assert _load_findings(provider, small) == []
    assert _load_findings(provider, healthy) == []
    report = provider.fleet.host(visible).load_test([0])
    assert report.throughput[0] < 0.5 * 989 < 712 and report.models[0] == "NVIDIA H100 80GB HBM3"


def test_what_the_fault_table_says_makes_it_fast_again() -> None:
    provider, clock = _sim()
    visible, hidden = sorted(provider.fleet.nodes)[:2]
    provider.fleet.inject(visible, "slow_node")
    provider.fleet.inject(hidden, "slow_node_hidden")
    node = provider.fleet.node
    assert node(visible).slowdown(0, clock.now) == node(hidden).slowdown(0, clock.now) == 0.2
    node(visible).clear(Action.RESET_GPU)
    node(hidden).clear(Action.RESET_GPU)  # host-side: a reset does not reach it
    assert node(visible).slowdown(0, clock.now) == 0.0
    assert node(hidden).slowdown(0, clock.now) == 0.2
    provider.fleet.host(hidden).reboot("k")
    assert node(hidden).slowdown(0, clock.now) == 0.0


def test_an_intermittent_slow_node_is_slow_half_the_time() -> None:
    provider, clock = _sim()
    node = sorted(provider.fleet.nodes)[0]
    provider.fleet.inject(node, "slow_node_intermittent", slowdown=0.3)
    period = FAULTS["slow_node_intermittent"].slow
    assert period is not None and period.duty == 0.5
    clock.now = T0 + timedelta(minutes=2)
    assert _load_findings(provider, node)  # in its slow phase: the proof succeeds
    clock.now = T0 + timedelta(minutes=7)
    assert _load_findings(provider, node) == []  # in its fast phase: it passes


def test_a_job_with_one_slow_node_prints_its_ranks_the_factor_slower() -> None:
    provider, clock = _sim(nodes=10)
    nodes = sorted(provider.fleet.nodes)[:8]
    provider.jobs.launch(JOB, nodes)
    clock.now = T0 + timedelta(minutes=3)
    provider.fleet.inject(nodes[2], "slow_node", slowdown=0.25)
    clock.now = T0 + timedelta(minutes=13)
    lines = _lines(provider)
    assert len(lines) == 13 * 8 * 8  # a line a minute per rank, 8 ranks per pod
    last = lines[-1]
    assert (last["rank"], last["local_rank"], last["gpu"]) == (63, 7, "GPU-gpu-node-007-0-7")
    assert (last["step"], last["steps"]) == (13 * 600, 600)  # 100 a checkpoint, one per 10 s
    assert last["at"] == (T0 + timedelta(minutes=13)).isoformat()
    after = [x for x in lines if str(x["at"]) > (T0 + timedelta(minutes=3)).isoformat()]
    slow, others = _compute(after, range(16, 24)), _compute(after, range(64))
    assert slow / others == pytest.approx(1.25, rel=0.02)
    assert others == pytest.approx(COMPUTE_S, rel=0.02)
    before = [x for x in lines if x not in after]
    assert _compute(before, range(16, 24)) == pytest.approx(COMPUTE_S, rel=0.02)
    assert lines == _lines(provider)  # seeded: the same lines every call
    # A run's pods keep a log tail, not the whole run.
    clock.now = T0 + timedelta(hours=5)
    assert len(_lines(provider)) == TAIL * 8 * 8


def test_one_slow_gpu_slows_its_rank_only() -> None:
    provider, clock = _sim()
    nodes = sorted(provider.fleet.nodes)[:4]
    provider.jobs.launch(JOB, nodes)
    provider.fleet.inject(nodes[1], "slow_gpu", gpu=5, slowdown=0.4)
    clock.now = T0 + timedelta(minutes=10)
    lines = _lines(provider)
    assert _compute(lines, range(13, 14)) == pytest.approx(1.4 * COMPUTE_S, rel=0.03)
    assert _compute(lines, range(8, 13)) == pytest.approx(COMPUTE_S, rel=0.03)


def test_input_skew_is_the_jobs_data_not_the_nodes_compute() -> None:
    provider, clock = _sim()
    nodes = sorted(provider.fleet.nodes)[:4]
    provider.jobs.launch(JOB, nodes)
    provider.jobs.skew(nodes[3], 0.2)
    clock.now = T0 + timedelta(minutes=10)
    lines = _lines(provider)
    skewed = [float(str(x["data_s"])) for x in lines if int(str(x["rank"])) >= 24]
    fine = [float(str(x["data_s"])) for x in lines if int(str(x["rank"])) < 24]
    assert statistics.median(skewed) == pytest.approx(DATA_S + 0.2, rel=0.02)
    assert statistics.median(fine) == pytest.approx(DATA_S, rel=0.05)
    assert _compute(lines, range(24, 32)) == pytest.approx(COMPUTE_S, rel=0.02)


def test_a_restart_leaves_a_cordoned_node_out_and_takes_a_spare() -> None:
    provider, _ = _sim()
    nodes = sorted(provider.fleet.nodes)
    jobs = provider.jobs
    jobs.launch(JOB, nodes[:4])
    jobs.spares, jobs.fits_from_fleet = [nodes[6]], True
    provider.fleet.cordon_by_hand(nodes[1])
    assert jobs.job_shape(JOB).fits == 4  # three of its own and the spare
    jobs.restart_job(JOB, 1, "slow node", size=3)  # shrink
    assert jobs.runs[str(JOB)][-1].nodes == [nodes[0], nodes[2], nodes[3]]
    jobs.restart_job(JOB, 2, "grow", size=4)  # swap: the spare in its place
    assert jobs.runs[str(JOB)][-1].nodes == [nodes[0], nodes[2], nodes[3], nodes[6]]


def test_job_times_carries_each_pods_rank_reports() -> None:
    provider, clock = _sim(nodes=66)
    nodes = sorted(provider.fleet.nodes)[:64]
    provider.jobs.launch(JOB, nodes)
    provider.fleet.inject(nodes[13], "slow_node", slowdown=0.2)
    clock.now = T0 + timedelta(hours=2)
    [times] = provider.jobs.job_times()
    ranks = [p for pod in times.pods for p in pod.progress if p.event.value == "rank"]
    assert len(ranks) == 64 * 8 * TAIL  # a pod's log tail: bounded however long the run
    assert {pod.node for pod in times.pods} == set(nodes)
    # A line once printed stays as it was: the node mended, its past lines are still slow.
    provider.fleet.clear_faults(nodes[13])
    clock.now += timedelta(minutes=2)
    [later] = provider.jobs.job_times()
    pod = next(p for p in later.pods if p.node == nodes[13])
    compute = [p.compute_s for p in pod.progress if p.event.value == "rank"]
    assert len(compute) == 8 * TAIL
    assert min(compute[: -2 * 8]) > 1.15 * COMPUTE_S > max(compute[-2 * 8 :])


def test_the_detector_names_the_slow_node_from_the_sims_job_times() -> None:
    """End to end below the guard: the sim's pods' lines, placed and judged as the scan does."""
    provider, clock = _sim(nodes=12)
    nodes = sorted(provider.fleet.nodes)
    provider.jobs.launch(JOB, nodes[:8])
    skewed = JobRef(namespace="ml", name="skewed")
    provider.jobs.launch(skewed, nodes[8:12])
    clock.now += timedelta(minutes=10)
    provider.fleet.inject(nodes[5], "slow_node", slowdown=0.2)
    provider.jobs.skew(nodes[9], 0.2)
    clock.now += timedelta(minutes=10)
    slow, skew = job_symptoms.judge_jobs(provider.jobs.job_times(), clock.now)
    assert [s.node for s in slow.suspects] == [nodes[5]] and slow.application == []
    assert skew.suspects == [] and [s.node for s in skew.application] == [nodes[9]]


def test_a_drain_evicts_the_jobs_pod_and_its_ranks_fail_for_the_guard() -> None:
    """What a proven slow node's ladder does to its job: the drain evicts the job's pod, the
    other ranks stall in the collective it left, and the job watch finds the failures."""
    provider, clock = _sim()
    nodes = sorted(provider.fleet.nodes)
    provider.jobs.launch(JOB, nodes[:4])
    clock.now += timedelta(minutes=5)
    provider.fleet.cordon_by_hand(nodes[2])
    provider.fleet.cluster.control.drain(nodes[2], lambda _: None, "k")
    failures = provider.jobs.failed_pods()
    assert [(f.failure.node, f.failure.termination.reason) for f in failures] == [
        (nodes[0], "Error"),
        (nodes[1], "Error"),
        (nodes[2], "Evicted"),
        (nodes[3], "Error"),
    ]
    assert failures[2].failure.termination.disruption == "EvictionByEvictionAPI"
    assert "Watchdog caught collective operation timeout" in failures[0].failure.log_tail
    assert provider.jobs.runs[str(JOB)][-1].ended_at == clock.now
    provider.fleet.cluster.control.drain(nodes[5], lambda _: None, "k2")  # no pod of the job there
    assert len(provider.jobs.failed_pods()) == 4
