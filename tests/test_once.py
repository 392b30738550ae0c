"""Exactly once where effects land: each disruptive action, asked twice with one key — the
second time after its answer was lost — changes the node once and answers what the first did.
On the simulator, on Kubernetes (the real client against the emulator) and on the agent's own
machine (its durable ledger survives the agent)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.host.local import LocalHost
from adapters.kubernetes.ledger import ACTIONS_ANNOTATION
from adapters.sim import SimFleet
from kubeapi import ApiServer
from remedy.core.errors import ActionFailed, ActionRefused, TransientError
from remedy.core.once import LedgerEntry, Stage, once
from remedy.detection.probe import ProbeConfig
from tests.kube import NODES, PODS, call, kube, node, pod, sent

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
        control.drain(NODE, lambda left: None, "")  # the GPUs must be free first (unkeyed)
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
    sim.ledger[KEY] = sim.ledger[KEY].model_copy(update={"stage": Stage.STARTED})  # no answer
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
    api: ApiServer,
) -> None:
    cluster = kube(api)
    api.objects[NODES, None, "n1"] = node()
    api.objects[PODS, "jobs", "train"] = pod("train", gpus=8)
    eviction = "/api/v1/namespaces/jobs/pods/train/eviction"
    first = await call(cluster.control.drain, "n1", lambda left: None, KEY)
    again = await call(cluster.control.drain, "n1", lambda left: None, KEY)
    assert again == first == "evicted 1 pods, left 0 DaemonSet/mirror pods"
    assert len(sent(api, "POST", eviction)) == 1
    kept = json.loads(api.objects[NODES, None, "n1"]["metadata"]["annotations"][ACTIONS_ANNOTATION])
    assert [(e["key"], e["action"], e["stage"]) for e in kept] == [(KEY, "drain", "done")]


async def test_a_keyed_job_kill_on_kubernetes_deletes_once(
    api: ApiServer,
) -> None:
    cluster = kube(api)
    api.objects[NODES, None, "n1"] = node()
    api.objects[PODS, "jobs", "train"] = pod("train", gpus=8)
    await call(cluster.control.kill_gpu_pods, "n1", KEY)
    api.objects[PODS, "jobs", "train"] = pod("train", gpus=8)  # rescheduled here meanwhile
    await call(cluster.control.kill_gpu_pods, "n1", KEY)
    assert len(sent(api, "DELETE", "/api/v1/namespaces/jobs/pods/train")) == 1


async def test_a_plain_replacement_repeated_after_the_node_went_is_not_done_again(
    api: ApiServer,
) -> None:
    cluster = kube(api, replacer="plain")
    api.objects[NODES, None, "n1"] = node() | {"metadata": node()["metadata"] | {"uid": "uid-old"}}
    first = await call(cluster.replacer.replace, "n1", "uid-old")
    deleted = sent(api, "DELETE", "/api/v1/nodes/n1")
    assert first.startswith("deleted node n1") and len(deleted) == 1
    assert deleted[0].data["preconditions"] == {"uid": "uid-old"}  # never a newer object
    api.objects[NODES, None, "n1"] = node() | {  # a new machine took the name
        "metadata": node()["metadata"] | {"uid": "uid-new"}
    }
    again = await call(cluster.replacer.replace, "n1", "uid-old")
    assert "already replaced" in again and len(sent(api, "DELETE", "/api/v1/nodes/n1")) == 1


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


@pytest.mark.server  # the reboot command runs as a process
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
        LedgerEntry(key=KEY, action="reboot", stage=Stage.STARTED, at=NOW, boot_id="boot-a")
    )
    assert agent(tmp_path, "boot-b").reboot(KEY) == "rebooted (boot-a → boot-b)"
    assert not (tmp_path / "issued").exists()


def test_without_a_key_nothing_is_recorded_and_the_effect_runs(tmp_path: Path) -> None:
    ran: list[int] = []
    ledger = agent(tmp_path, "boot-a").ledger
    for _ in range(2):
        once(ledger, "", "drain", lambda: NOW, lambda: str(ran.append(1)), lambda _: "unsure")
    assert ran == [1, 1] and not (tmp_path / "state" / "actions.json").exists()


def test_an_unwritable_ledger_refuses_to_act(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("a file where the folder should be")
    with pytest.raises(Exception, match="cannot (open|read|write) the action ledger"):
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


# -- an answer lost between the effect and its record --------------------------------------
async def test_a_job_kill_resumed_after_a_lost_answer_kills_only_the_pods_it_meant(
    api: ApiServer,
) -> None:
    """The kill was recorded (with the pods it was for) and its answer lost; meanwhile the job
    put a new pod on the node. The retry deletes what is left of the first list, not the new
    pod."""
    cluster = kube(api)
    started = LedgerEntry(
        key=KEY, action="kill_job", stage=Stage.STARTED, at=NOW, targets=["uid-train"]
    )
    api.objects[NODES, None, "n1"] = node(
        annotations={ACTIONS_ANNOTATION: json.dumps([started.model_dump(mode="json")])}
    )
    api.objects[PODS, "jobs", "train"] = pod("train", gpus=8)
    api.objects[PODS, "jobs", "train-2"] = pod("train-2", gpus=8)  # rescheduled since
    answer = await call(cluster.control.kill_gpu_pods, "n1", KEY)
    assert answer == "deleted 1 pods using the node's GPUs"
    assert len(sent(api, "DELETE", "/api/v1/namespaces/jobs/pods/train")) == 1
    assert sent(api, "DELETE", "/api/v1/namespaces/jobs/pods/train-2") == []


async def test_an_entry_this_remedy_cannot_read_is_kept_and_hides_nothing(
    api: ApiServer,
) -> None:
    cluster = kube(api)
    newer = {"key": "k-newer", "action": "drain_p2p", "stage": "paused", "at": "2026-12-01T00:00Z"}
    old = LedgerEntry(key="k-old", action="drain", stage=Stage.DONE, at=NOW, detail="evicted 3")
    book = json.dumps([newer, old.model_dump(mode="json"), "scribble"])
    api.objects[NODES, None, "n1"] = node(annotations={ACTIONS_ANNOTATION: book})
    assert await call(cluster.control.drain, "n1", lambda left: None, "k-old") == "evicted 3"
    await call(cluster.control.kill_gpu_pods, "n1", KEY)
    kept = json.loads(api.objects[NODES, None, "n1"]["metadata"]["annotations"][ACTIONS_ANNOTATION])
    assert kept[:3] == [newer, old.model_dump(mode="json"), "scribble"]
    assert kept[3]["key"] == KEY and kept[3]["stage"] == "done"


async def test_a_node_that_opted_out_gets_no_write_not_even_a_record(
    api: ApiServer,
) -> None:
    cluster = kube(api)
    api.objects[NODES, None, "n1"] = node(labels={"remedy.io/managed": "false"})
    with pytest.raises(ActionRefused):
        await call(cluster.control.kill_gpu_pods, "n1", KEY)
    assert [r for r in api.requests if r.method in ("PATCH", "DELETE")] == []


async def test_a_server_error_on_a_node_named_409_is_not_taken_for_a_conflict(
    api: ApiServer,
) -> None:
    cluster = kube(api)
    api.objects[NODES, None, "gpu-node-409"] = node("gpu-node-409")
    api.fail("patch /api/v1/nodes/gpu-node-409", 500)
    with pytest.raises(TransientError, match="500"):
        await call(cluster.control.kill_gpu_pods, "gpu-node-409", KEY)
    assert len(sent(api, "PATCH", "/api/v1/nodes/gpu-node-409")) == 1


@pytest.mark.server  # the reboot command runs as a process
def test_a_reboot_command_that_fails_is_a_failure_and_a_retry_runs_it(tmp_path: Path) -> None:
    host = agent(tmp_path, "boot-a")
    host._reboot_command = ("no-such-reboot-tool",)
    with pytest.raises(ActionFailed, match="no-such-reboot-tool is not installed"):
        host.reboot(KEY)
    host._reboot_command = ("sh", "-c", "echo refused >&2; exit 1")
    with pytest.raises(ActionFailed, match="exited 1: refused"):
        host.reboot(KEY)  # the failed attempt did nothing: this one runs the command again
    host._reboot_command = ("sh", "-c", f"echo reboot >> {tmp_path / 'issued'}")
    assert host.reboot(KEY).startswith("reboot issued")
    assert (tmp_path / "issued").read_text() == "reboot\n"


def test_a_reset_with_nothing_to_reset_fails_with_its_reason(tmp_path: Path) -> None:
    host = LocalHost(
        "n1",
        ProbeConfig(),
        allow_reset=True,
        state_dir=tmp_path / "state",
        boot_id_file=tmp_path / "boot_id",
    )
    with pytest.raises(ActionFailed, match="no GPU to reset on n1"):
        host.reset_gpus([], KEY)
