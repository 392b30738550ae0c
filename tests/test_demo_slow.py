"""The demo's slow node (workers/demo_slow.py), without a server: the first guarded job is
elastic with a hot spare, one of its nodes is made slow with no finding reported, its pods'
rank lines come a runbook-minute apart, and what the demo prints follows the twin as the
job's guard would move it (the proof, the cordon, the job going on without the node, the
node fast again). The guard's own part (issue 55, helper G) is driven by hand here."""

from __future__ import annotations

from datetime import timedelta

from adapters.sim.ranks import rank_lines
from remedy.attribution.elastic import ElasticRange
from remedy.attribution.guard import JobRef
from remedy.core.models import Action
from workers import demo_slow
from workers.demo_config import FAULT_WEIGHTS, JOB_NODES, DemoConfig, demo_provider
from workers.providers.sim import SimProvider


def _demo() -> tuple[DemoConfig, demo_slow.SlowNode, SimProvider]:
    config = DemoConfig(nodes=12, jobs=2, speedup=60)
    provider = demo_provider(config)
    nodes = sorted(provider.fleet.nodes)
    for i in range(config.jobs):  # as demo_run launches them
        job = JobRef(namespace=config.job_namespace, name=f"llm-pretrain-{i}")
        provider.jobs.launch(job, nodes[i * JOB_NODES : (i + 1) * JOB_NODES])
    slow = demo_slow.slow_node(config, provider)
    assert slow is not None
    return config, slow, provider


def test_the_first_job_runs_elastic_with_a_slow_node_and_a_hot_spare() -> None:
    config, slow, provider = _demo()
    jobs = provider.jobs
    assert (str(slow.job), slow.name, slow.slowdown) == ("ml/llm-pretrain-0", "gpu-node-002", 0.25)
    assert jobs.elastic[str(slow.job)] == ElasticRange(min=3, max=4)
    assert slow.spares == jobs.spares == ["gpu-node-008"]  # not the shared node nor the idle one
    assert jobs.pace.every == timedelta(seconds=1)  # a minute of runbook time
    assert "gpu-node-002 in ml/llm-pretrain-0 (elastic 3:4, hot spare gpu-node-008)" in (
        demo_slow.introduce(slow, jobs)
    )
    assert demo_slow.slow_node(DemoConfig(slow_node=None), provider) is None


def test_what_the_demo_prints_follows_the_story() -> None:
    _, slow, provider = _demo()
    fleet, jobs = provider.fleet, provider.jobs
    said = demo_slow.inject(fleet, jobs, slow)
    assert said.startswith("  slow   gpu-node-002: its ranks compute 25% slower; no Xid")
    assert demo_slow.look(provider, slow) == []
    # The ranks on it print the factor slower (seeded noise is ±3 %).
    run = jobs.runs[str(slow.job)][-1]
    lines = rank_lines(
        str(slow.job),
        slow.name,
        2,
        8,
        run.started_at,
        fleet.clock() + timedelta(seconds=5),
        jobs.pace,
        jobs.checkpoint_every,
    )
    assert lines and all(
        0.4 * 1.25 * 0.96 < float(x["compute_s"]) < 0.4 * 1.25 * 1.04 for x in lines
    )
    # The guard's ladder proves it, cordons it, and the job goes on with the spare.
    fleet.host(slow.name).load_test([])
    fleet.cordon_by_hand(slow.name)
    assert jobs.job_shape(slow.job).fits == 4  # three of its own and the spare
    jobs.restart_job(slow.job, 1, "SlowNode on gpu-node-002", size=4)
    said_then = demo_slow.look(provider, slow)
    assert said_then[0].startswith("  slow   gpu-node-002: load test, the proof: 8 GPUs SlowGpu (")
    assert said_then[0].endswith("H100 SXM reference 989 TFLOP/s (below 50%)): proven")
    assert said_then[1:] == [
        "  slow   gpu-node-002: cordoned: no new pod lands there",
        "  job    ml/llm-pretrain-0: goes on without gpu-node-002 on 4 nodes "
        "(gpu-node-008 swapped in)",
    ]
    with fleet.lock:
        assert fleet.node(slow.name).clear(Action.REBOOT) == 0  # only new hardware mends it
        fleet.node(slow.name).clear(Action.REPLACE)
    fleet.record(slow.name, "replace")
    assert demo_slow.look(provider, slow) == ["  slow   gpu-node-002: fast again after replace"]
    assert slow.left and slow.fast


def test_a_random_slow_fault_is_not_reported_only_told() -> None:
    _, _, provider = _demo()
    assert 0 < FAULT_WEIGHTS["slow_node"] < 0.05  # a small share of the mix
    in_job = provider.fleet.inject("gpu-node-005", "slow_node", slowdown=0.1)
    idle = provider.fleet.inject("gpu-node-010", "slow_node")
    reported = provider.fleet.inject("gpu-node-006", "ecc_dbe")
    assert demo_slow.unreported(in_job, provider) == (
        "  slow   gpu-node-005: slow_node, 10% slower, nothing else; "
        "ml/llm-pretrain-1's guard must find it"
    )
    assert "no job runs there: only a load test" in (demo_slow.unreported(idle, provider) or "")
    assert demo_slow.unreported(reported, provider) is None


def test_a_job_restarted_once_the_node_is_mended_is_told_so() -> None:
    """Sped up, the ladder may mend and restore the node before the guard restarts the job."""
    _, slow, provider = _demo()
    fleet, jobs = provider.fleet, provider.jobs
    demo_slow.inject(fleet, jobs, slow)
    fleet.host(slow.name).load_test([])
    with fleet.lock:
        fleet.node(slow.name).clear(Action.REPLACE)
    jobs.restart_job(slow.job, 1, "evicted", size=4)
    said = demo_slow.look(provider, slow)
    assert said[-2:] == [
        "  slow   gpu-node-002: fast again after its fault cleared",
        "  job    ml/llm-pretrain-0: goes on with gpu-node-002 back, mended",
    ]


def test_a_restart_that_still_holds_the_slow_node_is_not_told_as_going_on() -> None:
    """Another node's failure may restart the job after the proof and before the slow node's
    cordon: the job is not yet rid of it, so the demo waits for the run without it."""
    _, slow, provider = _demo()
    fleet, jobs = provider.fleet, provider.jobs
    demo_slow.inject(fleet, jobs, slow)
    fleet.host(slow.name).load_test([])
    jobs.restart_job(slow.job, 1, "another node's Xid", size=4)
    said = demo_slow.look(provider, slow)
    assert not [line for line in said if "goes on" in line]
    assert not slow.left
