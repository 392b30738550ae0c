"""The fleet file under the chaos harness: every attribute of the simulated fleet kept, each
operation one locked transaction that survives a SIGKILL right after its effect, and the
knobs (lost answers, failures before the effect, the API down) obeyed by every process."""

from __future__ import annotations

import dataclasses
import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.sim import SimFleet
from adapters.sim.cluster import REMEDY_CORDON
from adapters.sim.node import SimNode
from chaos.codec import FLEET_NOT_STORED, FLEET_STORED, NOT_STORED, decode_fleet, encode_fleet
from chaos.knobs import Knobs
from chaos.seams import StoredHost, stored_cluster
from chaos.store import FleetStore
from remedy.core.errors import ActionFailed, TransientError
from remedy.core.once import Stage
from remedy.detection.conditions import NodeCondition
from remedy.scan.cluster import CordonOwner
from tests.processes import Children

NODE = "gpu-node-001"
KEY = "node-remediation/gpu-node-001/run-1/rung-0"
ROOT = Path(__file__).resolve().parent.parent


def a_store(tmp_path: Path, knobs: Knobs | None = None) -> FleetStore:
    store = FleetStore(tmp_path / "fleet.json")
    store.create(SimFleet(nodes=4, pool="p"), knobs)
    return store


def test_every_attribute_of_the_fleet_and_its_nodes_is_kept() -> None:
    fleet = SimFleet(nodes=3, pool="p")
    fleet.inject(NODE, "ecc_dbe", gpu=2)
    fleet.cluster.control.cordon(NODE, CordonOwner("wf", "ecc"))
    fleet.cluster.control.drain(NODE, lambda _: None, KEY)
    now = datetime.now(UTC)
    condition = NodeCondition(
        type="GpuHealthy",
        status="False",
        reason="Xid48",
        message="m",
        last_heartbeat_time=now,
        last_transition_time=now,
    )
    fleet.cluster.marks.set_conditions(NODE, [condition])
    fleet.fail_next("drain", TransientError("503"), times=2)
    fleet.break_action("replace", ActionFailed("no spares"))
    fleet.lose_answers("reboot", 3)
    again = decode_fleet(encode_fleet(fleet))
    assert encode_fleet(again) == encode_fleet(fleet)
    node = again.node(NODE)
    assert node.faults[0].kind == "ecc_dbe" and node.annotations[REMEDY_CORDON].startswith("wf")
    assert node.ledger[KEY].stage is Stage.DONE and node.conditions["GpuHealthy"] == condition
    assert isinstance(again.failing["drain"][0], TransientError) and again.failing["drain"][1] == 2
    assert isinstance(again.broken["replace"], ActionFailed)
    # A field added to the simulator is stored, or named here as not stored on purpose.
    fields = {f.name for f in dataclasses.fields(SimNode)}
    assert fields - NOT_STORED == set(encode_fleet(fleet)["nodes"][0])
    assert set(vars(SimFleet(nodes=0))) == FLEET_STORED | FLEET_NOT_STORED


def test_a_keyed_action_repeated_after_a_lost_answer_lands_once(tmp_path: Path) -> None:
    store = a_store(tmp_path, Knobs(lose_answer_p=1.0))
    control = stored_cluster(store).control
    with pytest.raises(TransientError, match="answer was lost"):
        control.drain(NODE, lambda _: None, KEY)
    store.set_knobs(Knobs())
    answer = control.drain(NODE, lambda _: None, KEY)  # the retry, in any process
    world = FleetStore(store.path).read()
    assert "evicted 1 pods" in answer
    assert world.fleet.effects == [(NODE, "drain", KEY)] and world.fleet.doubled() == []
    assert world.tally.answers_lost == 1 and world.tally.repeats == 1


def test_a_failure_before_the_effect_changes_nothing(tmp_path: Path) -> None:
    store = a_store(tmp_path, Knobs(fail_before_p=1.0))
    with pytest.raises(TransientError, match="before the effect"):
        StoredHost(store, NODE).reset_gpus([], KEY)
    world = store.read()
    assert world.fleet.effects == [] and world.fleet.node(NODE).ledger == {}
    assert world.tally.failed_before == 1


def test_the_cluster_api_down_refuses_cluster_calls_not_the_host(tmp_path: Path) -> None:
    until = datetime.now(UTC) + timedelta(minutes=1)
    store = a_store(tmp_path, Knobs(api_down_until=until))
    cluster = stored_cluster(store)
    with pytest.raises(TransientError, match="API is down"):
        cluster.fleet.pool_size("p")
    with pytest.raises(TransientError, match="API is down"):
        cluster.control.cordon(NODE, CordonOwner("wf", "x"))
    assert StoredHost(store, NODE).probe_config.expected_gpus == 8  # the agent still works
    store.set_knobs(Knobs())
    assert cluster.fleet.pool_size("p") == 4


def test_a_process_killed_right_after_the_effect_leaves_effect_and_record(
    tmp_path: Path, processes: Children
) -> None:
    """The agent dies right after a reboot landed (die_after): the file has the reboot and its
    ledger entry; the retry from another process answers from the ledger."""
    store = a_store(tmp_path, Knobs(die_after=["reboot"]))
    script = (
        "import sys; from pathlib import Path; from chaos.store import FleetStore; "
        "from chaos.seams import StoredHost; "
        f"StoredHost(FleetStore(Path(sys.argv[1])), {NODE!r}).reboot({KEY!r}); print('answered')"
    )
    done = processes.run([sys.executable, "-c", script, str(store.path)], cwd=ROOT)
    assert done.returncode == -signal.SIGKILL and "answered" not in done.stdout
    world = store.read()
    assert world.fleet.effects == [(NODE, "reboot", KEY)] and world.tally.deaths == 1
    assert world.fleet.node(NODE).boot_id == 1
    assert world.fleet.node(NODE).ledger[KEY].stage is Stage.DONE
    assert StoredHost(store, NODE).reboot(KEY) == "rebooted"  # no second reboot (a new boot)
    assert store.read().fleet.node(NODE).boot_id == 1


def test_processes_writing_at_once_lose_no_update(tmp_path: Path, processes: Children) -> None:
    """Each call reads, changes and writes the whole file: without the lock, two processes
    would overwrite each other's effects."""
    store = a_store(tmp_path)
    script = (
        "import sys; from pathlib import Path; from chaos.store import FleetStore; "
        "from chaos.seams import stored_cluster; "
        "control = stored_cluster(FleetStore(Path(sys.argv[1]))).control\n"
        "for i in range(20): control.kill_gpu_pods(sys.argv[2], f'{sys.argv[3]}/rung-{i}')"
    )
    writers = [
        processes.start([sys.executable, "-c", script, str(store.path), node, f"w{n}"], cwd=ROOT)
        for n, node in enumerate(["gpu-node-000", "gpu-node-001", "gpu-node-001", "gpu-node-002"])
    ]
    assert [w.wait() for w in writers] == [0, 0, 0, 0]
    fleet = store.read().fleet
    assert len(fleet.effects) == 80 and fleet.doubled() == []
    assert len(fleet.node("gpu-node-001").ledger) == 40
