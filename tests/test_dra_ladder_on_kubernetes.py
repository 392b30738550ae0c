"""A GPU-scoped ladder end to end on the strict API emulator with DRA claims: one GPU of eight
fails on a node running eight one-GPU pods, each pod's GPU known only from its ResourceClaim;
the ladder (time-skipping server, the Kubernetes adapter) quarantines that GPU with a
DeviceTaintRule, evicts its one pod, resets it on the (simulated) host while the other seven
keep running, and returns it to allocation. The node is never cordoned."""

from __future__ import annotations

import uuid

from temporalio.testing import WorkflowEnvironment

from adapters.kubernetes.gpu_scope import rule_name
from adapters.sim import SimFleet
from adapters.sim.node import SimPod
from kubeapi import ApiServer
from remedy.acting.gpu_use import GpuClaim
from remedy.core.models import Action
from remedy.ladder.remediation import AttemptResult, Outcome
from tests.kube import NODES, PODS, node
from tests.ladder import Handle, remediate
from tests.test_abort_wins import held_entered
from tests.test_gpu_scoped_ladder import gpu_ladder
from tests.test_gpu_use import CLAIMS, SLICES, claim, dra_pod, gpu_slice
from tests.test_ladder_on_kubernetes import adapter

NODE = "k8s-000"
BAD = 3
RULES = "resource.k8s.io/v1beta2/devicetaintrules"
PODS_BY_GPU = {g: f"infer-{g}" for g in range(8)}


def dra_node(api: ApiServer, pool: str) -> None:
    """The node in ``pool`` with its DRA driver's ResourceSlice, and eight pods, each holding
    one GPU through a claim allocated to ``gpu-<g>`` (no agent annotation: the API tells)."""
    api.objects[NODES, None, NODE] = node(NODE, labels={"remedy.io/pool": pool})
    api.objects[SLICES, None, f"{NODE}-gpus"] = gpu_slice(NODE)
    for g, name in PODS_BY_GPU.items():
        api.objects[CLAIMS, "jobs", f"{name}-gpu"] = claim(f"{name}-gpu", f"gpu-{g}", pool=NODE)
        api.objects[PODS, "jobs", name] = dra_pod(name, f"{name}-gpu", node_name=NODE)


def running(api: ApiServer) -> list[str]:
    return sorted(name for (_, _, name) in api.objects.keys(PODS))


async def test_one_bad_gpu_of_eight_dra_pods_evicts_one_pod_and_returns_the_gpu(
    time_env: WorkflowEnvironment, api: ApiServer
) -> None:
    pool = f"pool-{uuid.uuid4().hex[:8]}"  # the pool's budget is counted from the node labels
    dra_node(api, pool)
    fleet = SimFleet(nodes=1, name_prefix="k8s", pool=pool)
    # The host side: the seven other GPUs stay busy through the reset (a whole-node reset
    # would refuse); the bad GPU's process is gone once its pod is evicted.
    fleet.node(NODE).pods = [
        SimPod(name, uses_gpus=True, gpus=(g,), via=GpuClaim.DRA)
        for g, name in PODS_BY_GPU.items()
        if g != BAD
    ]
    others = sorted(n for g, n in PODS_BY_GPU.items() if g != BAD)
    finding = fleet.inject(NODE, "ecc_dbe", gpu=BAD)
    held = fleet.hold("reset_gpu")
    seen: dict[str, object] = {}

    async def during_reset(handle: Handle) -> None:
        """What the API holds while the GPU is being reset: the rule, seven pods."""
        await held_entered(held)
        key = (RULES, None, rule_name(NODE, BAD))
        seen["rule"] = api.objects[key] if key in api.objects else None
        seen["pods"] = running(api)
        held.release()

    ran = await remediate(time_env, fleet, finding, gpu_ladder(), during_reset, adapter(api))

    assert ran.result.outcome is Outcome.RECOVERED, ran.result
    assert ran.ladder == [
        (Action.DRAIN, AttemptResult.DONE),
        (Action.RESET_GPU, AttemptResult.VERIFIED),
    ]
    rule = seen["rule"]
    assert isinstance(rule, dict), "no DeviceTaintRule while the GPU was out"
    assert rule["spec"]["deviceSelector"] == {
        "driver": "gpu.nvidia.com",
        "pool": NODE,
        "device": f"gpu-{BAD}",
    }
    assert seen["pods"] == others  # only GPU 3's pod was evicted, before the reset
    assert running(api) == others  # and the seven kept running to the end
    evicted = [r.path for r in api.requests if r.method == "POST" and r.path.endswith("/eviction")]
    assert evicted == [f"/api/v1/namespaces/jobs/pods/{PODS_BY_GPU[BAD]}/eviction"]
    # never cordoned: no write of the node's spec, and it is schedulable
    specs = [r for r in api.requests if r.method == "PATCH" and r.path.endswith(NODE)]
    assert [r.data for r in specs if "spec" in r.data] == []
    assert not api.objects[NODES, None, NODE]["spec"]["unschedulable"]
    assert fleet.node(NODE).unschedulable is False
    # the GPU back in allocation: its rule deleted, the node's record of it gone
    assert list(api.objects.keys(RULES)) == []
    assert "remedy.io/gpus-out" not in api.objects[NODES, None, NODE]["metadata"]["annotations"]
    drain = next(a for a in ran.state.attempts if a.action is Action.DRAIN)
    assert f"GPU {BAD} quarantined" in drain.detail, drain.detail
    restore = ran.state.attempts[-1]
    assert restore.action is Action.RESTORE, restore
    assert f"GPU {BAD} back in allocation" in restore.detail, restore.detail
