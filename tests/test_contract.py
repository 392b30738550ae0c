"""The contract between workflows and activities holds: every activity a workflow can call —
every action of a ladder included — is registered on the worker that serves its queue, every
signal, query and update has its handler (an update its validator), nothing outside the
contract spells a name, and every message reads a payload from a newer remedy (rollbacks) and
from an older one (histories)."""

from __future__ import annotations

import ast
import json
import typing
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from adapters.sim.jobs import SimJobs
from contract.activities import ACTION, CORDON, all_activities
from contract.defs import ActivityDef, ContractError, Queue, UpdateDef, _deadline_in_attempts
from contract.messages import all_queries, all_signals, all_updates
from remedy.core.models import Action, Started
from remedy.disruption.budget import LeaseGrant
from remedy.ladder.remediation import FindingReport
from remedy.runbook import load_runbooks
from tests.conftest import ROOT
from workers.controller import WORKFLOWS, controller_activities, node_activities
from workflows.common import PATIENT_RETRY


def _names(activities: list[Callable[..., Any]]) -> set[str]:
    return {activity._Definition.must_from_callable(fn).name for fn in activities}


async def test_every_activity_is_registered_on_the_worker_that_serves_its_queue(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=1)
    with ThreadPoolExecutor(max_workers=1):
        controller = _names(controller_activities(time_env.client, fleet.cluster, jobs=SimJobs()))
    node = _names(node_activities(fleet.host))
    declared = all_activities()
    for spec in declared:
        served_by = controller if spec.queue is Queue.CONTROLLER else node
        assert spec.name in served_by, f"{spec.name} ({spec.queue}) has no activity"
    # ...and nothing is registered that the contract does not declare.
    assert controller | node == {d.name for d in declared}
    # Every action of the table is an activity: a new Action cannot go without one.
    assert set(ACTION) | {Action.CORDON} == set(Action) and CORDON.name == "cordon"


def _handlers(kind: str) -> dict[str, dict[str, Any]]:
    out = {}
    for cls in WORKFLOWS:
        defn = workflow._Definition.must_from_class(cls)
        out[defn.name] = {"signal": defn.signals, "query": defn.queries, "update": defn.updates}[
            kind
        ]
    return out


def test_every_signal_query_and_update_has_its_handler() -> None:
    messages: list[tuple[str, list[Any]]] = [
        ("signal", all_signals()),
        ("query", all_queries()),
        ("update", all_updates()),
    ]
    for kind, declared in messages:
        handlers = _handlers(kind)
        for spec in declared:
            assert spec.name in handlers[spec.workflow], f"{spec.workflow} lacks {kind} {spec.name}"
        named = {(s.workflow, s.name) for s in declared}
        for wf, by_name in handlers.items():
            for name in by_name:
                if name is not None and not name.startswith("__"):
                    assert (wf, name) in named, f"{wf} handles {kind} {name}: not in the contract"
    # An update answers only after its validator said there is something to do.
    for wf, updates in _handlers("update").items():
        for name, defn in updates.items():
            assert defn.validator is not None, f"{wf} update {name} has no validator"


def test_an_update_handler_that_does_not_match_its_declaration_is_refused() -> None:
    spec = UpdateDef("approve", LeaseGrant, Started, "Nowhere")

    async def approve(self: object, grant: LeaseGrant) -> LeaseGrant:
        return grant

    with pytest.raises(ContractError, match="update approve"):
        spec.handler(approve)


# -- nothing spells a name outside the contract ---------------------------------------------
SPELLING = {
    "execute_activity",
    "start_activity",
    "defn",
    "signal",
    "query",
    "update",
    "execute_update",
    "start_update",
}


def _spelt_names(path: Path) -> Iterator[str]:
    """Names spelt as string literals, and the SDK's own registration and call sites (which
    take names) used directly instead of through the contract's declarations."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.keyword) and node.arg == "start_signal":
            yield f"{path.name}:{node.value.lineno}: start_signal="
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in DIRECT:
                yield f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}"
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr not in SPELLING:
            continue
        named = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "name")]
        if any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in named):
            yield f"{path.name}:{node.lineno}: {node.func.attr}({ast.unparse(named[0])})"


DIRECT = {
    ("workflow", "execute_activity"),
    ("workflow", "start_activity"),
    ("workflow", "signal"),
    ("workflow", "query"),
    ("workflow", "update"),
    ("activity", "defn"),
}


def test_no_activity_or_signal_name_is_spelt_outside_the_contract() -> None:
    spelt = [
        where
        for package in ("workflows", "activities", "workers")
        for path in sorted((ROOT / package).rglob("*.py"))
        for where in _spelt_names(path)
    ]
    assert spelt == []


# -- messages across versions ---------------------------------------------------------------
def _models(tp: Any, seen: set[type[BaseModel]]) -> None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if tp in seen:
            return
        seen.add(tp)
        for field in tp.model_fields.values():
            _models(field.annotation, seen)
    for arg in typing.get_args(tp):
        _models(arg, seen)


def test_every_message_ignores_fields_a_newer_version_added() -> None:
    roots: list[Any] = []
    for spec in all_activities():
        roots += [spec.arg, spec.result]
    roots += [s.payload for s in all_signals()] + [q.result for q in all_queries()]
    roots += [u.payload for u in all_updates()] + [u.result for u in all_updates()]
    for cls in WORKFLOWS:
        run = workflow._Definition.must_from_class(cls).run_fn
        roots += list(typing.get_type_hints(run).values())
    models: set[type[BaseModel]] = set()
    for root in roots:
        _models(root, models)
    assert len(models) > 40
    strict = sorted(m.__name__ for m in models if m.model_config.get("extra") == "forbid")
    assert strict == []


def _decode(payload: Any, tp: type[Any]) -> Any:
    converter = pydantic_data_converter.payload_converter
    [encoded] = converter.to_payloads([payload])
    encoded.data = json.dumps(payload).encode()
    return converter.from_payloads([encoded], [tp])[0]


def test_a_report_from_a_newer_remedy_is_read_with_its_new_fields_ignored() -> None:
    [runbook] = load_runbooks([ROOT / "runbooks" / "gpu-memory-ecc.yaml"])
    newer = {
        "finding": {
            "node": "gpu-1",
            "check": "xid",
            "reason": "Xid48",
            "severity": "critical",
            "xid": 48,
            "observed_at": "2026-11-30T12:00:00Z",
            "gpu_architecture": "blackwell",
        },
        "runbook": runbook.model_dump(mode="json"),
        "reported_by": "agent 2.0",
    }
    newer["runbook"]["ladder"][0]["idempotency_key"] = "rung-0"
    report = _decode(newer, FindingReport)
    assert report.finding.xid == 48 and report.runbook.ladder == runbook.ladder


def test_a_bare_payload_from_an_older_remedy_is_read_into_its_message() -> None:
    """Histories recorded before messages were models carry the bare value; this release
    still writes it bare (the release before reads nothing else), and reads the model form
    the next release writes, with fields that one adds ignored."""
    assert _decode("pool-a", LeaseGrant) == LeaseGrant(pool="pool-a")
    assert _decode("node-remediation/gpu-1", Started).workflow_id == "node-remediation/gpu-1"
    [written] = pydantic_data_converter.payload_converter.to_payloads([LeaseGrant(pool="a")])
    assert written.data == b'"a"'
    assert _decode({"pool": "a", "epoch": 3}, LeaseGrant) == LeaseGrant(pool="a")


def test_an_implementation_that_does_not_match_its_declaration_is_refused() -> None:
    spec = ActivityDef("probe_twice", Started, Started, Queue.NODE)

    def probe_twice(node: str) -> Started:
        return Started(workflow_id=node)

    with pytest.raises(ContractError, match=r"takes \[<class 'str'>\]"):
        spec.defn(probe_twice)


async def test_a_node_activity_is_never_run_by_the_controller_as_a_local_one() -> None:
    """A local activity runs in the worker that runs the workflow: the controller's. A node's
    steps run on the node's own queue, so ``local`` is refused before anything is scheduled."""
    spec = ActivityDef("probe_twice", Started, Started, Queue.NODE)
    with pytest.raises(ContractError, match="cannot run in the controller"):
        await spec.execute(Started(workflow_id="w"), task_queue="node-q", local=True)
    with pytest.raises(ContractError, match="pass the node's task queue"):
        await spec.execute(Started(workflow_id="w"))


def test_a_local_activitys_deadline_is_also_a_count_of_attempts() -> None:
    """The worker keeps a local activity's deadline on its own clock, which time-skipping does
    not move: 10 minutes of remedy's patient retries (2, 4, 8, 16, then 30 s apart) are 24
    attempts, after which it fails as a regular one would at its deadline."""
    options = {"retry_policy": PATIENT_RETRY, "schedule_to_close_timeout": timedelta(minutes=10)}
    _deadline_in_attempts(options)
    assert options["retry_policy"].maximum_attempts == 24
    assert PATIENT_RETRY.maximum_attempts == 0  # the shared policy is left as it was
