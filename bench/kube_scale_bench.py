"""The fleet scan against the strict API server at 10,000 nodes, and the agents' API writes.

1. The scan: the server (``kubeapi.ApiServer``, in this process) holds the nodes — labels,
   annotations, taints, conditions, capacity and node info as a GPU node carries them, about
   2.5 KB of JSON each — and their Karpenter NodeClaims. Each way of scanning runs in a fresh
   child process (the controller), whose peak resident memory is the figure, measured apart
   from the server's:
   - baseline: the scan as it was before issue 17 (kept below as ``old_scan``): one list of
     every node through the client's models, turned back into JSON;
   - remedy: ``KubernetesFleetView.nodes()``, a page of 500 at a time as raw JSON, each page
     reduced to the scan's facts before the next is read.
   The same for finding one node's NodeClaim: every NodeClaim listed (before) vs one GET by
   the node's owner reference (now).
2. Agent writes in steady state: every node's agent probes every 30 s; its conditions change
   on average once a day per node (an assumption: a GPU fault or recovery, far more often than
   the fleets Meta reported on). Counted over an hour of simulated time after an hour's warm-up,
   with the agent's own rule (``remedy.scan.liveness.publish_due``: on change, plus a heartbeat)
   next to the old one (a write after every probe).

Targets (issue 17): a 10,000-node scan in ≤ 10 s and ≤ 300 MB controller RSS; agent writes
≤ 40/s. Prints the figures and writes bench/results/kube_scale.json and kube_scale.md.

    .venv/bin/python bench/kube_scale_bench.py [--nodes 10000] [--scans 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_SCAN_S, TARGET_RSS_MB, TARGET_WRITES_PER_S = 10.0, 300.0, 40.0
PROBE = timedelta(seconds=30)  # the agent's default --interval
CHANGES_PER_NODE_PER_DAY = 1.0


# -- the fleet on the server ------------------------------------------------------------------
GPU_NODE_LABELS = """
    kubernetes.io/arch=amd64 kubernetes.io/os=linux node.kubernetes.io/instance-type=p5.48xlarge
    topology.kubernetes.io/region=us-east-1 topology.kubernetes.io/zone=us-east-1a
    karpenter.sh/nodepool=gpu karpenter.sh/registered=true nvidia.com/gpu.present=true
    nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 nvidia.com/gpu.count=8
    nvidia.com/gpu.memory=81559 nvidia.com/cuda.driver.major=550 remedy.io/pool=default
    nvidia.com/gpu.deploy.device-plugin=true nvidia.com/gpu.deploy.dcgm-exporter=true
"""


def gpu_node(i: int) -> dict[str, Any]:
    """Node ``i`` as a Karpenter-provisioned 8-GPU node looks to the API (about 2.5 KB)."""
    name, claim = f"gpu-node-{i:05d}", f"gpu-{i:05d}"
    stamp = "2026-11-30T18:00:00Z"
    labels = dict(pair.split("=") for pair in GPU_NODE_LABELS.split()) | {
        "kubernetes.io/hostname": name
    }
    resources = {"cpu": "192", "memory": "2097152Ki", "nvidia.com/gpu": "8", "pods": "110"}
    conditions = [
        {
            "type": kind,
            "status": "True" if kind == "Ready" else "False",
            "reason": f"Kubelet{kind}" if kind == "Ready" else f"No{kind}",
            "message": "kubelet is posting ready status" if kind == "Ready" else "ok",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": "2026-11-01T00:00:00Z",
        }
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready", "GpuProblem")
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "karpenter.sh/nodeclaim-hash": "4916113384452316398",
            },
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodeClaim",
                    "name": claim,
                    "uid": f"00000000-0000-4000-8000-{i:012d}",
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "providerID": f"aws:///us-east-1a/i-{i:017x}",
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        },
        "status": {
            "capacity": resources,
            "allocatable": resources | {"cpu": "191450m", "memory": "2050000Ki"},
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "machineID": f"{i:032x}",
                "systemUUID": f"ec2{i:05d}-0000-4000-8000-000000000000",
                "bootID": f"{i:08x}-0000-4000-8000-000000000000",
                "kernelVersion": "6.1.0-1029-aws",
                "osImage": "Ubuntu 22.04.4 LTS",
                "containerRuntimeVersion": "containerd://1.7.20",
                "kubeletVersion": "v1.31.0",
                "kubeProxyVersion": "v1.31.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def node_claim(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": f"gpu-{i:05d}", "labels": {"karpenter.sh/nodepool": "gpu"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
            "requirements": [{"key": INSTANCE_TYPE, "operator": "In", "values": ["p5.48xlarge"]}],
        },
        "status": {"nodeName": f"gpu-node-{i:05d}", "providerID": f"aws:///us-east-1a/i-{i:017x}"},
    }


# -- the controller, in a child process -------------------------------------------------------
def rss_mb() -> tuple[float, float]:
    """This process's (resident, peak resident) memory, MB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def old_scan(nodes: Any, view: Any) -> list[Any]:
    """The baseline: the fleet scan before issue 17 (adapters/kubernetes/fleet.py at 4671dc8),
    every node in one list through the client's models, then back to JSON."""
    listed = nodes.json(nodes.core.list_node())
    return [view._facts(node) for node in listed.get("items", [])]


def old_claim(custom: Any, node: str) -> dict[str, Any]:
    """The baseline's NodeClaim lookup: every NodeClaim listed, matched on status.nodeName."""
    claims = custom.list_cluster_custom_object("karpenter.sh", "v1", "nodeclaims")
    return next(c for c in claims["items"] if c["status"]["nodeName"] == node)


def child(way: str, url: str, repeats: int, nodes_total: int) -> None:
    """One way, ``repeats`` times, in this fresh process; prints its figures as JSON."""
    from kubernetes import client as k8s

    from adapters.kubernetes.config import TimeoutApiClient
    from adapters.kubernetes.fleet import KubernetesFleetView
    from adapters.kubernetes.nodes import NodeApi
    from adapters.kubernetes.replace import KarpenterReplacer

    configuration = k8s.Configuration()
    configuration.host = url
    nodes = NodeApi(TimeoutApiClient(configuration, timeout=(5.0, 300.0)))
    view, custom = KubernetesFleetView(nodes), k8s.CustomObjectsApi(nodes.api)
    replacer = KarpenterReplacer(nodes)
    last = f"gpu-node-{nodes_total - 1:05d}"  # the last listed: the worst case for a list
    current = nodes.node(last) if way.startswith("claim") else {}
    ways: dict[str, Callable[[], int]] = {
        "scan-old": lambda: len(old_scan(nodes, view)),
        "scan-new": lambda: len(view.nodes()),
        "claim-old": lambda: len([old_claim(custom, last)]),
        "claim-new": lambda: len([replacer._claim_of(last, current)]),
    }
    idle, _ = rss_mb()
    walls, counts = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        counts.append(ways[way]())
        walls.append(time.perf_counter() - start)
    print(
        json.dumps({"walls": walls, "count": counts[-1], "idle_mb": idle, "peak_mb": rss_mb()[1]})
    )


class WayRun(BaseModel):
    way: str
    wall_s: float  # the median of the runs
    runs: int
    count: int
    idle_mb: float  # the controller process before its first call (interpreter, client)
    peak_mb: float  # its peak resident memory over the runs


def run_child(way: str, url: str, repeats: int, nodes: int) -> WayRun:
    out = subprocess.run(
        [sys.executable, __file__, "--child", way, url, str(repeats), str(nodes)],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return WayRun(
        way=way,
        wall_s=statistics.median(got["walls"]),
        runs=repeats,
        count=got["count"],
        idle_mb=got["idle_mb"],
        peak_mb=got["peak_mb"],
    )


# -- the agents' writes -----------------------------------------------------------------------
@dataclass
class WritesRun:
    nodes: int
    heartbeat_s: float
    changes_per_node_per_day: float
    old_per_s: float  # a write after every probe
    new_per_s: float  # on change plus a heartbeat
    rule: str  # how new_per_s was found


def agent_writes(nodes: int, seed: int = 17) -> WritesRun:
    """Every agent's probes over two simulated hours (the first one a warm-up, the agents
    starting at random moments), its writes counted in the second with the agent's own rule
    (``publish_due``: on change, plus a heartbeat)."""
    from remedy.detection.conditions import NodeCondition
    from remedy.scan.liveness import AGENT_HEARTBEAT, publish_due

    change = PROBE / timedelta(days=1) * CHANGES_PER_NODE_PER_DAY  # per probe
    old = nodes / PROBE.total_seconds()
    rng = random.Random(seed)
    t0 = datetime(2026, 11, 30, tzinfo=UTC)
    probes = int(timedelta(hours=2) / PROBE)
    writes = 0
    for _ in range(nodes):
        status, on_node = "False", list[NodeCondition]()
        start = t0 + rng.random() * PROBE
        for k in range(probes):
            now = start + k * PROBE
            if rng.random() < change:
                status = "True" if status == "False" else "False"
            condition = NodeCondition(
                type="GpuProblem",
                status=status,
                reason="Xid79" if status == "True" else "NoGpuProblem",
                message="",
                last_heartbeat_time=now,
                last_transition_time=now,
            )
            if publish_due([condition], on_node, now):
                on_node = [condition]
                writes += k >= probes // 2
    per_s, heartbeat_s = writes / 3600, AGENT_HEARTBEAT.total_seconds()
    rule = "counted with the agent's rule (remedy.scan.liveness.publish_due)"
    return WritesRun(nodes, heartbeat_s, CHANGES_PER_NODE_PER_DAY, old, per_s, rule)


# -- the run ----------------------------------------------------------------------------------
class KubeScaleReport(BaseModel):
    nodes: int
    load_s: float  # filling the server (not part of any figure)
    scan_old: WayRun
    scan_new: WayRun
    claim_old: WayRun
    claim_new: WayRun
    writes: WritesRun
    target_scan_s: float = TARGET_SCAN_S
    target_rss_mb: float = TARGET_RSS_MB
    target_writes_per_s: float = TARGET_WRITES_PER_S


@contextmanager
def fleet_server(count: int) -> Iterator[tuple[str, float]]:
    """The strict server holding ``count`` nodes and their NodeClaims: its URL and how long
    filling it took."""
    from kubeapi import ApiServer

    with ApiServer() as api:
        start = time.perf_counter()
        for i in range(count):
            node, claim = gpu_node(i), node_claim(i)
            api.objects["v1/nodes", None, node["metadata"]["name"]] = node
            api.objects["karpenter.sh/v1/nodeclaims", None, claim["metadata"]["name"]] = claim
        yield str(api.url).rstrip("/"), time.perf_counter() - start


HEADERS = ["", "way", "wall s", "controller peak RSS MB", "RSS before the first call MB"]


def rows(report: KubeScaleReport) -> list[list[str]]:
    n = report.nodes
    named = [
        (f"scan of {n} nodes", "baseline: one list through the models", report.scan_old),
        (f"scan of {n} nodes", "remedy: pages of 500, raw JSON", report.scan_new),
        ("one node's NodeClaim", f"baseline: list all {n}", report.claim_old),
        ("one node's NodeClaim", "remedy: GET by owner reference", report.claim_new),
    ]
    return [
        [what, way, f"{r.wall_s:.2f}", f"{r.peak_mb:.0f}", f"{r.idle_mb:.0f}"]
        for what, way, r in named
    ]


def verdicts(report: KubeScaleReport) -> list[str]:
    new, w = report.scan_new, report.writes

    def met(ok: bool) -> str:
        return "met" if ok else "NOT met"

    return [
        f"target: a {report.nodes}-node scan in ≤ {report.target_scan_s:g} s: "
        f"{new.wall_s:.2f} s ({met(new.wall_s <= report.target_scan_s)}; baseline "
        f"{report.scan_old.wall_s:.2f} s)",
        f"target: ≤ {report.target_rss_mb:g} MB controller RSS: peak {new.peak_mb:.0f} MB "
        f"({met(new.peak_mb <= report.target_rss_mb)}; baseline {report.scan_old.peak_mb:.0f} MB)",
        f"target: agent writes ≤ {report.target_writes_per_s:g}/s for {w.nodes} nodes: "
        f"{w.new_per_s:.1f}/s ({met(w.new_per_s <= report.target_writes_per_s)}; baseline, a "
        f"write every {PROBE.total_seconds():g} s probe: {w.old_per_s:.0f}/s) — heartbeat "
        f"{w.heartbeat_s:g} s, conditions changing {w.changes_per_node_per_day:g}× a day per node; "
        f"{w.rule}",
    ]


def main(nodes: int, scans: int) -> None:
    with fleet_server(nodes) as (url, load_s):
        print(f"  server holds {nodes} nodes and NodeClaims (filled in {load_s:.0f} s)", flush=True)
        runs = {}
        for way, repeats in (("scan-old", scans), ("scan-new", scans), ("claim-old", 5)):
            runs[way] = run_child(way, url, repeats, nodes)
            print(f"  {way}: {runs[way].wall_s:.2f} s, peak {runs[way].peak_mb:.0f} MB", flush=True)
        runs["claim-new"] = run_child("claim-new", url, 5, nodes)
    report = KubeScaleReport(
        nodes=nodes,
        load_s=load_s,
        scan_old=runs["scan-old"],
        scan_new=runs["scan-new"],
        claim_old=runs["claim-old"],
        claim_new=runs["claim-new"],
        writes=agent_writes(nodes),
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "kube_scale.json").write_text(report.model_dump_json(indent=2))
    (RESULTS / "kube_scale.md").write_text("\n".join(markdown_section(report)) + "\n")
    from workers.tables import plain

    print("\n" + "\n".join([*plain(HEADERS, rows(report)), "", *verdicts(report)]))


def markdown_section(report: KubeScaleReport) -> list[str]:
    """The figures in Markdown: kube_scale.md, and its section of report.md."""
    table = [
        "| " + " | ".join(HEADERS) + " |",
        "|---" * len(HEADERS) + "|",
        *("| " + " | ".join(r) + " |" for r in rows(report)),
    ]
    return [
        "## The fleet scan against the strict API server",
        "",
        f"{report.nodes} GPU nodes (~2.8 KB of JSON each) and their Karpenter NodeClaims in "
        "`kubeapi.ApiServer`; each way runs in a fresh controller process (its peak RSS is the "
        "figure, the server's is apart), the median of its runs (bench/kube_scale_bench.py).",
        "",
        *table,
        "",
        *(f"- {v}" for v in verdicts(report)),
    ]


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, way, url, repeats, total = sys.argv
        child(way, url, int(repeats), int(total))
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--nodes", type=int, default=10000)
        parser.add_argument("--scans", type=int, default=3, help="scans per way (the median)")
        args = parser.parse_args()
        main(args.nodes, args.scans)
