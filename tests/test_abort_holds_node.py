"""An abort keeps the node out of automation until a person hands it back (issue 52).

Before, after `remedy abort NODE --reason "vendor on site"` the next report started a new
ladder 15 s later, which rebooted the node, and nothing said it would. Now the abort marks the
node held for a person (an annotation on the node); the next report starts a ladder that
records it, and every one after, and does nothing on the node until `remedy resume-node`; the
replies say so. `abort --no-hold` leaves the node to the next report as before.

Against the real dev server (the CLI waits for the controller in real time), with the
simulated fleet; the Kubernetes adapter's mark on the kube-apiserver emulator."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from temporalio.testing import WorkflowEnvironment

from adapters.kubernetes.marks import KubernetesNodeMarks
from adapters.kubernetes.nodes import NodeApi
from adapters.sim import SimFleet
from contract.messages import ABORT_LADDER
from kubeapi import ApiServer
from remedy.core.models import Action
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import Outcome, Phase, RemediationState
from remedy.runbook import Match, Runbook, Rung
from remedy.trust.decisions import AbortRequest
from remedy.trust.person_hold import HOLD_ANNOTATION, read_hold
from tests.conftest import own_fleet, running_workers
from tests.kube import NODES, node
from tests.ladder import Handle, report, send_report, state_of, wait_for_phase
from tests.test_cli import cli
from tests.test_fleet_scan import scan_every_second
from workflows.person_hold import RECHECK_EVERY

# Cordons, then an hour's tolerance before it would reboot: a ladder to abort, and one that
# shows at once whether a report started climbing (cordon, tolerating) or waits held.
PATIENT = Runbook(
    name="patient-reboot",
    match=Match(xids=[48, 79]),
    tolerance=timedelta(hours=1),
    ladder=[Rung(action=Action.REBOOT)],
)
POLICY = BudgetPolicy(max_disruption="2", storm_share=1.0)


async def until(handle: Handle, holds: Callable[[RemediationState], bool]) -> RemediationState:
    """The ladder's state once it ``holds`` (real time: the dev server's clock runs)."""
    for _ in range(300):
        state = await state_of(handle)
        if holds(state):
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"never reached what was expected: {state.phase}")


def done_on(fleet: SimFleet, node_name: str) -> list[str]:
    return [action for n, action in fleet.actions if n == node_name]


async def test_abort_holds_the_node_against_the_next_report_until_resumed(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    address = ["--address", client.service_client.config.target_host]
    fleet = own_fleet("hold", 2)
    name = sorted(fleet.nodes)[0]
    async with running_workers(client, fleet, policy=POLICY) as queues:
        first = await report(client, queues, fleet.inject(name, "ecc_dbe"), PATIENT)
        await until(first, lambda s: s.phase is Phase.TOLERATING)
        aborted = await cli("abort", name, "--reason", "vendor on site", "--by", "carol", *address)
        hold = read_hold(fleet.node(name).annotations.get(HOLD_ANNOTATION), fleet.clock())
        before = done_on(fleet, name)

        # The next report, 15 s later in the field: recorded, nothing done, and said.
        held = await report(client, queues, fleet.inject(name, "gpu_lost", gpu=1), PATIENT)
        waiting = await until(held, lambda s: s.phase is Phase.HELD_FOR_PERSON)
        await send_report(held, fleet.inject(name, "ecc_dbe", gpu=2), PATIENT)
        recorded = await until(held, lambda s: s.reports_received == 2)
        await asyncio.sleep(1.0)  # time for a ladder that would act to act
        meanwhile = done_on(fleet, name)
        shown = await cli("show", name, *address)

        resumed = await cli(
            "resume-node", name, "--by", "dave", "--task-queue", queues.controller, *address
        )
        climbing = await until(held, lambda s: s.phase is Phase.TOLERATING)
        again = await cli(
            "resume-node", name, "--by", "dave", "--task-queue", queues.controller, *address
        )
    assert aborted[0] == 0, aborted
    assert (
        "held for a person: new reports are recorded and wait until `remedy resume-node "
        in (aborted[1])
    )
    assert (await first.result()).outcome is Outcome.ABORTED
    assert hold is not None and hold.by.startswith("carol") and hold.reason == "vendor on site"
    # Held: the two reports recorded, not acted on (no cordon, no step: nothing on the node).
    assert waiting.held == hold and waiting.attempts == []
    assert recorded.reports_received == 2 and recorded.attempts == []
    assert meanwhile == before
    assert shown[0] == 0 and "held for a person by carol" in shown[1], shown
    # Handed back: the mark gone, the ladder climbs for what it recorded.
    assert resumed[0] == 0, resumed
    assert resumed[1].startswith(f"{name}: handed back by dave (was held for a person by carol")
    assert "its ladder goes on with the 2 report(s) it recorded" in resumed[1]
    assert HOLD_ANNOTATION not in fleet.node(name).annotations
    assert climbing.held is None and climbing.cordoned_by_remedy
    assert again == (2, f"error: {name}: not held for a person: nothing to hand back\n")


async def test_abort_no_hold_leaves_the_node_to_the_next_report(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    address = ["--address", client.service_client.config.target_host]
    fleet = own_fleet("nohold", 2)
    name = sorted(fleet.nodes)[0]
    async with running_workers(client, fleet, policy=POLICY) as queues:
        first = await report(client, queues, fleet.inject(name, "ecc_dbe"), PATIENT)
        await until(first, lambda s: s.phase is Phase.TOLERATING)
        aborted = await cli("abort", name, "--reason", "look", "--no-hold", *address)
        nxt = await report(client, queues, fleet.inject(name, "gpu_lost", gpu=1), PATIENT)
        climbing = await until(nxt, lambda s: s.phase is Phase.TOLERATING)
        resumed = await cli("resume-node", name, "--task-queue", queues.controller, *address)
    assert aborted[0] == 0 and "not held: the next report starts a ladder" in aborted[1]
    assert HOLD_ANNOTATION not in fleet.node(name).annotations
    assert climbing.held is None and climbing.cordoned_by_remedy
    assert resumed == (2, f"error: {name}: not held for a person: nothing to hand back\n")


def test_the_kubernetes_adapter_marks_reads_and_lifts_the_hold(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node("n1", annotations={"keep": "me"})
    marks = KubernetesNodeMarks(NodeApi(api.client()))
    assert marks.person_hold("n1") is None
    assert marks.set_person_hold("n1", '{"by":"carol"}') is None
    assert marks.set_person_hold("n1", '{"by":"carol"}') == '{"by":"carol"}'  # no change
    assert marks.person_hold("n1") == '{"by":"carol"}'
    assert marks.set_person_hold("n1", None) == '{"by":"carol"}'
    assert marks.set_person_hold("n1", None) is None  # lifted twice: nothing to lift
    annotations = api.objects[NODES, None, "n1"]["metadata"]["annotations"]
    assert HOLD_ANNOTATION not in annotations and annotations["keep"] == "me"


async def test_a_hold_removed_by_hand_is_seen_on_the_ladders_clock(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    """No resume-node, no nudge: `kubectl annotate node N remedy.io/held-for-person-`. The
    held ladder reads the mark again every RECHECK_EVERY (the time-skipping server's clock),
    and not before."""
    name = sorted(fleet.nodes)[0]
    async with running_workers(time_env.client, fleet, policy=POLICY) as queues:
        first = await report(time_env.client, queues, fleet.inject(name, "ecc_dbe"), PATIENT)
        await wait_for_phase(time_env, first, Phase.TOLERATING)
        await ABORT_LADDER.execute(first, AbortRequest(by="carol", reason="vendor on site"))
        held = await report(time_env.client, queues, fleet.inject(name, "gpu_lost"), PATIENT)
        await wait_for_phase(time_env, held, Phase.HELD_FOR_PERSON)
        del fleet.node(name).annotations[HOLD_ANNOTATION]  # by hand
        await time_env.sleep(RECHECK_EVERY - timedelta(minutes=1))
        still = await state_of(held)
        climbing = await wait_for_phase(time_env, held, Phase.TOLERATING)
    assert still.phase is Phase.HELD_FOR_PERSON and still.attempts == []
    assert climbing.held is None and climbing.cordoned_by_remedy


def test_an_annotation_written_by_hand_holds_all_the_same() -> None:
    now = datetime(2026, 12, 7, 10, 53, tzinfo=UTC)
    hold = read_hold("yes", now)
    assert hold is not None and hold.by == "(by hand)" and hold.since == now
    assert read_hold("", now) is None and read_hold(None, now) is None


async def test_status_names_a_held_node_that_no_ladder_holds(dev_env: WorkflowEnvironment) -> None:
    """Aborted with --restore: back in service, no ladder, no cordon — healthy to the scan, so
    before it was in no row of `remedy status`. Held, it is listed: held for (a) person."""
    client = dev_env.client
    address = ["--address", client.service_client.config.target_host]
    fleet = own_fleet("status", 3)
    name = sorted(fleet.nodes)[0]
    schedule_id = f"scan-{uuid.uuid4().hex[:8]}"
    async with running_workers(client, fleet, policy=POLICY) as queues:
        first = await report(client, queues, fleet.inject(name, "ecc_dbe"), PATIENT)
        await until(first, lambda s: s.phase is Phase.TOLERATING)
        await cli("abort", name, "--reason", "vendor on site", "--restore", *address)
        fleet.node(name).faults.clear()  # the vendor's fix: healthy, but held
        await scan_every_second(client, queues, schedule_id)
        try:
            asked = ["status", "--schedule", schedule_id, "--pool", queues.pool, *address]
            for _ in range(100):  # until a scan after the abort has completed
                shown = await cli(*asked)
                if "held for person" in shown[1]:
                    break
                await asyncio.sleep(0.1)
        finally:
            await client.get_schedule_handle(schedule_id).delete()
    assert not fleet.node(name).unschedulable
    rows = [line for line in shown[1].splitlines() if line.startswith(name)]
    assert len(rows) == 1 and "held for person" in rows[0], shown[1]
