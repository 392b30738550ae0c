"""A GPU-scoped drain on the strict API emulator through the official client: the faulty GPU
gets a DRA device taint, only the pod on it is evicted, a retry with the same key does not act
again, the node stays schedulable and shows the GPU out; restore returns it."""

from __future__ import annotations

import pytest

from adapters.kubernetes.gpu_scope import GPU_USE, GPUS_OUT, TAINT
from kubeapi import ApiServer
from remedy.acting.gpu_use import GpuClaim, GpuUse, NodeGpuUse
from remedy.core.errors import ActionRefused
from tests.kube import kube, node, pod

NODES, PODS = "v1/nodes", "v1/pods"
RULES = "resource.k8s.io/v1beta2/devicetaintrules"
BAD = 3


def shared_node(api: ApiServer) -> None:
    """Eight one-GPU pods, and the agent's word on which GPU each uses."""
    use = NodeGpuUse(
        node="n1",
        uses=[
            GpuUse(namespace="jobs", pod=f"infer-{g}", gpu=g, via=GpuClaim.DEVICE_PLUGIN)
            for g in range(8)
        ],
    )
    api.objects[NODES, None, "n1"] = node(annotations={GPU_USE: use.model_dump_json()})
    for g in range(8):
        api.objects[PODS, "jobs", f"infer-{g}"] = pod(f"infer-{g}", gpus=1)


def test_a_gpu_scoped_drain_taints_the_gpu_and_evicts_only_its_pod(api: ApiServer) -> None:
    shared_node(api)
    gpus = kube(api).gpu_scope
    assert gpus is not None

    said = gpus.evict_gpu_pods("n1", [BAD], "wf/3/1", kill=False, owner="remediate/n1")
    again = gpus.evict_gpu_pods("n1", [BAD], "wf/3/1", kill=False, owner="remediate/n1")

    assert "GPU 3 quarantined" in said and "evicted 1 pods" in said, said
    assert "evicted 1 pods" in again  # the ledger's answer: the same key acts once
    left = sorted(name for (_, _, name) in api.objects.keys(PODS))
    assert left == [f"infer-{g}" for g in range(8) if g != BAD]
    rule = api.objects[RULES, None, f"remedy-n1-gpu-{BAD}"]
    assert rule["spec"]["deviceSelector"] == {
        "driver": "gpu.nvidia.com",
        "pool": "n1",
        "device": f"gpu-{BAD}",
    }
    assert rule["spec"]["taint"]["key"] == TAINT["key"]
    the_node = api.objects[NODES, None, "n1"]
    assert not the_node["spec"].get("unschedulable")  # never cordoned
    facts = next(f for f in kube(api).fleet.nodes() if f.name == "n1")
    assert facts.gpus_out == [BAD]

    assert gpus.lift_quarantine("n1", "someone-else") == []  # only its own ladder's hold
    assert gpus.lift_quarantine("n1", "remediate/n1") == [BAD]
    assert (RULES, None, f"remedy-n1-gpu-{BAD}") not in api.objects
    assert GPUS_OUT not in api.objects[NODES, None, "n1"]["metadata"]["annotations"]


def test_without_the_agents_gpu_use_a_pod_of_unknown_gpu_is_evicted_and_no_gpu_is_refused(
    api: ApiServer,
) -> None:
    """No ``remedy.io/gpu-use``: the API's view — a device-plugin pod's GPU is not in it, so
    the pod counts on every GPU and goes (never left on the bad GPU); no GPU named: refused."""
    api.objects[NODES, None, "n1"] = node()
    api.objects[PODS, "jobs", "infer-0"] = pod("infer-0", gpus=1)
    gpus = kube(api).gpu_scope
    assert gpus is not None
    with pytest.raises(ActionRefused, match="which pods to spare"):
        gpus.evict_gpu_pods("n1", [], "k0", kill=False, owner="remediate/n1")
    assert (PODS, "jobs", "infer-0") in api.objects
    gpus.evict_gpu_pods("n1", [BAD], "k", kill=False, owner="remediate/n1")
    assert (PODS, "jobs", "infer-0") not in api.objects
    assert len(list(api.objects.keys(RULES))) == 1


def test_a_person_releases_one_gpu_whichever_ladder_held_it(api: ApiServer) -> None:
    """`remedy release-gpu` on Kubernetes: that GPU's device taint and record go, another
    GPU's hold stays; a second release finds nothing; a rule whose record on the node was lost
    is still lifted."""
    shared_node(api)
    gpus = kube(api).gpu_scope
    assert gpus is not None
    gpus.evict_gpu_pods("n1", [BAD], "k3", kill=False, owner="node-remediation/n1")
    gpus.evict_gpu_pods("n1", [5], "k5", kill=False, owner="node-remediation/other")

    done = gpus.release_gpu("n1", BAD)
    again = gpus.release_gpu("n1", BAD)

    assert done.lifted and done.held_by == "node-remediation/n1", done
    assert again.lifted is False
    assert (RULES, None, f"remedy-n1-gpu-{BAD}") not in api.objects
    assert (RULES, None, "remedy-n1-gpu-5") in api.objects  # not asked for: held still
    annotations = api.objects[NODES, None, "n1"]["metadata"]["annotations"]
    assert annotations[GPUS_OUT] == '{"5":"node-remediation/other"}'

    lost = api.objects[NODES, None, "n1"]
    del lost["metadata"]["annotations"][GPUS_OUT]  # the record lost, the rule still there
    api.objects[NODES, None, "n1"] = lost
    orphan = gpus.release_gpu("n1", 5)
    assert orphan.lifted and orphan.held_by == ""
    assert (RULES, None, "remedy-n1-gpu-5") not in api.objects
