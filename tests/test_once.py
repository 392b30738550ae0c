"""Exactly once where effects land: each disruptive action, asked twice with one key — the
second time after its answer was lost — changes the node once and answers what the first did.
On the simulator, on Kubernetes (the real client against the emulator) and on the agent's own
machine (its durable ledger survives the agent)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import kmock
import pytest

from adapters.host.local import LocalHost
from adapters.kubernetes.ledger import ACTIONS_ANNOTATION
from adapters.sim import SimFleet
from remedy.errors import TransientError
from remedy.once import LedgerEntry, Step, once
from remedy.probe import ProbeConfig
from tests.test_kubernetes_cluster import NODES, PODS, call, kube, node, pod, sent

KEY = "node-remediation/n1/run-1/rung-1"
NOW = datetime(2026, 11, 30, tzinfo=UTC)
NODE = "gpu-node-000"


def twice_with_a_lost_answer(fleet: SimFleet, action: str, do: object) -> tuple[str, str]:
    """The first answer is lost after the effect landed; the retry asks again, same key."""
    assert callable(do)
    fleet.lose_answers(action)
    with pytest.raises(TransientError, match="answer was lost"):
        do()
    return do(), do()


@pytest.mark.parametrize("action", ["drain", "kill_job", "reset_gpu", "reboot"])
def test_the_simulator_applies_each_keyed_action_once(action: str) -> None:
    fleet = SimFleet(nodes=1)
    control, host = fleet.cluster.control, fleet.host(NODE)
    if action == "reset_gpu":
        control.drain(NODE, lambda left: None)  # the GPUs must be free first (unkeyed)
    calls = {
        "drain": lambda: control.drain(NODE, lambda left: None, KEY),
        "kill_job": lambda: control.kill_gpu_pods(NODE, KEY),
        "reset_gpu": lambda: host.reset_gpus([0], KEY),
        "reboot": lambda: host.reboot(KEY),
    }
    second, third = twice_with_a_lost_answer(fleet, action, calls[action])
    assert fleet.effects.count((NODE, action, KEY)) == 1 and fleet.doubled() == []
    assert second == third  # the first answer, every time
    if action == "reboot":
        assert fleet.node(NODE).boot_id == 1


def test_a_reboot_repeated_from_the_same_boot_is_not_issued_again() -> None:
    """The agent died after recording the key and issuing the reboot, before the node went
    down: the repeat finds the key and the boot it was issued from, and waits instead."""
    fleet = SimFleet(nodes=1)
    sim = fleet.node(NODE)
    sim.comes_back = False  # the reboot is issued; the node never returns to a new boot
    first = fleet.host(NODE).reboot(KEY)
    sim.ledger[KEY] = sim.ledger[KEY].model_copy(update={"step": Step.STARTED})  # no answer
    assert fleet.host(NODE).reboot(KEY).startswith("reboot issued from boot-0; not repeated")
    assert fleet.effects.count((NODE, "reboot", KEY)) == 1 and first.startswith("reboot issued")


def test_a_replacement_is_once_per_node_object() -> None:
    fleet = SimFleet(nodes=1)
    seen = fleet.cluster.control.node_boot(NODE).uid
    replacer = fleet.cluster.replacer
    fleet.lose_answers("replace")
    with pytest.raises(TransientError):
        replacer.replace(NODE, seen)
    again = replacer.replace(NODE, seen)  # the node under that name is a new object now
    assert "already replaced" in again and fleet.node(NODE).generation == 1
    assert fleet.effects.count((NODE, "replace", seen)) == 1


# -- Kubernetes: the ledger is on the Node object ------------------------------------------
async def test_a_keyed_drain_on_kubernetes_evicts_once_and_keeps_its_key_on_the_node(
    kmock: kmock.KubernetesEmulator,
) -> None:
    cluster = kube(kmock)
    kmock.objects[NODES, None, "n1"] = node()
    kmock.objects[PODS, "jobs", "train"] = pod("train", gpus=8)
    eviction = "/api/v1/namespaces/jobs/pods/train/eviction"

    def evicted(request: object) -> dict[str, str]:
        del kmock.objects[PODS, "jobs", "train"]
        return {"kind": "Status", "status": "Success"}

    kmock[f"post {eviction}"] << evicted
    first = await call(cluster.control.drain, "n1", lambda left: None, KEY)
    again = await call(cluster.control.drain, "n1", lambda left: None, KEY)
    assert again == first == "evicted 1 pods, left 0 DaemonSet/mirror pods"
    assert len(sent(kmock, "POST", eviction)) == 1
    kept = json.loads(
        kmock.objects[NODES, None, "n1"]["metadata"]["annotations"][ACTIONS_ANNOTATION]
    )
    assert [(e["key"], e["action"], e["step"]) for e in kept] == [(KEY, "drain", "done")]


async def test_a_keyed_job_kill_on_kubernetes_deletes_once(
    kmock: kmock.KubernetesEmulator,
) -> None:
    cluster = kube(kmock)
    kmock.objects[NODES, None, "n1"] = node()
    kmock.objects[PODS, "jobs", "train"] = pod("train", gpus=8)
    await call(cluster.control.kill_gpu_pods, "n1", KEY)
    kmock.objects[PODS, "jobs", "train"] = pod("train", gpus=8)  # rescheduled here meanwhile
    await call(cluster.control.kill_gpu_pods, "n1", KEY)
    assert len(sent(kmock, "DELETE", "/api/v1/namespaces/jobs/pods/train")) == 1


async def test_a_plain_replacement_repeated_after_the_node_went_is_not_done_again(
    kmock: kmock.KubernetesEmulator,
) -> None:
    cluster = kube(kmock, replacer="plain")
    kmock.objects[NODES, None, "n1"] = node() | {
        "metadata": node()["metadata"] | {"uid": "uid-old"}
    }
    first = await call(cluster.replacer.replace, "n1", "uid-old")
    deleted = sent(kmock, "DELETE", "/api/v1/nodes/n1")
    assert first.startswith("deleted node n1") and len(deleted) == 1
    assert deleted[0].data["preconditions"] == {"uid": "uid-old"}  # never a newer object
    kmock.objects[NODES, None, "n1"] = node() | {  # a new machine took the name
        "metadata": node()["metadata"] | {"uid": "uid-new"}
    }
    again = await call(cluster.replacer.replace, "n1", "uid-old")
    assert "already replaced" in again and len(sent(kmock, "DELETE", "/api/v1/nodes/n1")) == 1


# -- the agent's own machine: a file that outlives the agent and the reboot -----------------
def agent(tmp_path: Path, boot: str) -> LocalHost:
    (tmp_path / "boot_id").write_text(boot + "\n")
    return LocalHost(
        "n1",
        ProbeConfig(expected_gpus=1),
        allow_reboot=True,
        reboot_command=("sh", "-c", f"echo reboot >> {tmp_path / 'issued'}"),
        state_dir=tmp_path / "state",
        boot_id_file=tmp_path / "boot_id",
    )


def test_the_agent_reboots_once_per_key_across_its_own_restart_and_the_reboot(
    tmp_path: Path,
) -> None:
    first = agent(tmp_path, "boot-a").reboot(KEY)
    # The agent went down with the node before it answered; the one on the new boot is asked
    # again: its ledger on the node's disk says what was done.
    entry = agent(tmp_path, "boot-a").ledger.entry(KEY)
    assert entry is not None and entry.boot_id == "boot-a"
    again = agent(tmp_path, "boot-b").reboot(KEY)
    assert (tmp_path / "issued").read_text() == "reboot\n"
    assert first.startswith("reboot issued") and again == first


def test_an_answer_lost_mid_reboot_is_resolved_by_the_boot_id(tmp_path: Path) -> None:
    host = agent(tmp_path, "boot-a")
    host.ledger.record(  # recorded, issued, and the process died before it answered
        LedgerEntry(key=KEY, action="reboot", step=Step.STARTED, at=NOW, boot_id="boot-a")
    )
    assert agent(tmp_path, "boot-b").reboot(KEY) == "rebooted (boot-a → boot-b)"
    assert not (tmp_path / "issued").exists()


def test_without_a_key_nothing_is_recorded_and_the_effect_runs(tmp_path: Path) -> None:
    ran: list[int] = []
    ledger = agent(tmp_path, "boot-a").ledger
    for _ in range(2):
        once(ledger, "", "drain", NOW, lambda: str(ran.append(1)), lambda _: "unsure")
    assert ran == [1, 1] and not (tmp_path / "state" / "actions.json").exists()


def test_an_unwritable_ledger_refuses_to_act(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("a file where the folder should be")
    with pytest.raises(Exception, match="cannot (read|write) the action ledger"):
        agent(tmp_path, "boot-a").reboot(KEY)
    assert not (tmp_path / "issued").exists()


def test_an_agent_in_dry_run_says_what_it_would_do_and_does_nothing(tmp_path: Path) -> None:
    (tmp_path / "boot_id").write_text("boot-a\n")
    host = LocalHost(
        "n1",
        ProbeConfig(expected_gpus=2),
        allow_reset=True,
        allow_reboot=True,
        reboot_command=("sh", "-c", f"echo reboot >> {tmp_path / 'issued'}"),
        state_dir=tmp_path / "state",
        boot_id_file=tmp_path / "boot_id",
        dry_run=True,
    )
    assert host.reset_gpus([], KEY) == "dry run: would reset GPU 0, 1"
    assert host.reboot(KEY).startswith("dry run: would reboot")
    assert not (tmp_path / "issued").exists() and not (tmp_path / "state").exists()
