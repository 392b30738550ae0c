"""The simulated fleet as JSON and back: every attribute the seams read or change.

A node is encoded field by field from its dataclass (``SimNode``'s type hints choose how), so a
field added there is kept without a change here; the few that cannot leave the process are
named in ``NOT_STORED`` (the clock is the wall clock in every process; the Xid event queue
belongs to one agent's NVML watcher, which the chaos processes do not run; the NVLink and NIC
counter windows and the exporter's last Xid reading are an agent's memory of its readings,
with a lock: each process keeps its own, as a restarted agent starts its windows again)."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from pydantic import TypeAdapter

from adapters.sim import SimFleet
from adapters.sim.fabric import SimFabricJobs
from adapters.sim.node import SimNode
from remedy.core.errors import RemedyError
from remedy.disruption.quarantine import BreakerState

NOT_STORED = frozenset(
    {"clock", "_xids", "_xid_ready", "nvlink_window", "nic_history", "exporter_readings"}
)
# SimFleet's attributes that each process makes for itself: the wall clock, its own lock (the
# file's lock is the one that counts), the random source of inject_random (the harness picks
# faults with its own), the gates a test holds an action at (threads of one process), the
# callbacks a drain tells (the sim's jobs, wired in-process) and the record of load tests the
# demo tells its slow node's story from (this process's, none of the chaos run's promises).
FLEET_NOT_STORED = frozenset({"clock", "lock", "_rng", "holds", "drained", "load_tests"})

_HINTS = typing.get_type_hints(SimNode)
_NODE_FIELDS: dict[str, TypeAdapter[Any]] = {
    f.name: TypeAdapter(_HINTS[f.name])
    for f in dataclasses.fields(SimNode)
    if f.name not in NOT_STORED
}
_FLEET_FIELDS: dict[str, TypeAdapter[Any]] = {
    "check_timeout_s": TypeAdapter(float),
    "speedup": TypeAdapter(float),
    "gpus_per_node": TypeAdapter(int),
    "actions": TypeAdapter(list[tuple[str, str]]),
    "effects": TypeAdapter(list[tuple[str, str, str]]),
    "lost_answers": TypeAdapter(dict[str, int]),
    "serials": TypeAdapter(list[str]),
    "alerts": TypeAdapter(list[tuple[str, str, str]]),  # the breakers' Events
    "breakers": TypeAdapter(dict[str, BreakerState]),  # as each pool's budget published it
    "fabric": TypeAdapter(SimFabricJobs),  # the fabric tests' Jobs and the figures they print
}
FLEET_STORED = frozenset({*_FLEET_FIELDS, "nodes", "broken", "failing"})


def encode_fleet(fleet: SimFleet) -> dict[str, Any]:
    out = {
        name: adapter.dump_python(getattr(fleet, name), mode="json")
        for name, adapter in _FLEET_FIELDS.items()
    }
    out["nodes"] = [encode_node(node) for node in fleet.nodes.values()]
    out["broken"] = {action: _error(err) for action, err in fleet.broken.items()}
    out["failing"] = {
        action: [_error(err), times] for action, (err, times) in fleet.failing.items()
    }
    return out


def decode_fleet(data: dict[str, Any]) -> SimFleet:
    fleet = SimFleet(nodes=0)
    for name, adapter in _FLEET_FIELDS.items():
        setattr(fleet, name, adapter.validate_python(data[name]))
    fleet.nodes = {n["name"]: decode_node(n, fleet) for n in data["nodes"]}
    fleet.broken = {action: _remedy_error(err) for action, err in data["broken"].items()}
    fleet.failing = {
        action: (_remedy_error(err), int(times)) for action, (err, times) in data["failing"].items()
    }
    return fleet


def encode_node(node: SimNode) -> dict[str, Any]:
    return {
        name: adapter.dump_python(getattr(node, name), mode="json")
        for name, adapter in _NODE_FIELDS.items()
    }


def decode_node(data: dict[str, Any], fleet: SimFleet) -> SimNode:
    values = {name: adapter.validate_python(data[name]) for name, adapter in _NODE_FIELDS.items()}
    return SimNode(clock=fleet.clock, **values)


def _error(err: RemedyError) -> dict[str, str]:
    return {"type": type(err).__name__, "message": str(err)}


def _remedy_error(data: dict[str, str]) -> RemedyError:
    kinds, todo = {RemedyError.__name__: RemedyError}, [RemedyError]
    while todo:
        for sub in todo.pop().__subclasses__():
            kinds[sub.__name__] = sub
            todo.append(sub)
    return kinds[data["type"]](data["message"])
