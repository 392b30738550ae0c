"""A MIG node's layout on the strict API emulator through the official client: before a reset
or a reboot the MIG manager's state is marked pending (never the layout itself), put back if
the action did not run, and the wait after it answers with the MIG manager's own word (the test
plays the MIG manager: it writes the labels as the manager does)."""

from __future__ import annotations

from kubernetes import client as k8s
from temporalio.testing import ActivityEnvironment

from activities.mig_layout import MigLayoutActivities
from kubeapi import ApiServer
from remedy.acting.mig_layout import (
    MIG_CONFIG,
    MIG_CONFIG_STATE,
    MigLayout,
    MigLayouts,
    MigLayoutStep,
)
from remedy.core.models import NodeRef
from tests.kube import kube, node

NODES = "v1/nodes"
LAYOUT = "all-3g.71gb"


def mig_node(api: ApiServer, **labels: str) -> MigLayouts:
    api.objects[NODES, None, "n1"] = node(labels=labels)
    layouts = kube(api).mig
    assert layouts is not None
    return layouts


def labels(api: ApiServer) -> dict[str, str]:
    return dict(api.objects[NODES, None, "n1"]["metadata"]["labels"])


def mig_manager_says(api: ApiServer, **changes: str | None) -> None:
    """What the MIG manager writes when it applies (or fails to apply) the layout."""
    k8s.CoreV1Api(api.client()).patch_node("n1", {"metadata": {"labels": changes}})


def wait(layouts: MigLayouts, before: MigLayout) -> tuple[bool, str]:
    step = MigLayoutStep(node=NodeRef(name="n1"), before=before)
    done = ActivityEnvironment().run(MigLayoutActivities(layouts, 0.01).mig_layout_restored, step)
    return done.ok, done.detail


def test_the_state_is_marked_pending_before_and_the_managers_success_is_awaited(
    api: ApiServer,
) -> None:
    layouts = mig_node(api, **{MIG_CONFIG: LAYOUT, MIG_CONFIG_STATE: "success"})

    before = layouts.ask_layout("n1")

    assert before == MigLayout(config=LAYOUT, state="success")
    assert labels(api) == {MIG_CONFIG: LAYOUT, MIG_CONFIG_STATE: "pending"}  # layout untouched
    assert layouts.ask_layout("n1") == MigLayout(config=LAYOUT, state="pending")  # a retry
    mig_manager_says(api, **{MIG_CONFIG_STATE: "success"})
    assert wait(layouts, before) == (True, f"MIG layout {LAYOUT} applied again")


def test_a_failed_or_missing_layout_is_not_recovered(api: ApiServer) -> None:
    layouts = mig_node(api, **{MIG_CONFIG: LAYOUT, MIG_CONFIG_STATE: "success"})
    before = layouts.ask_layout("n1")

    mig_manager_says(api, **{MIG_CONFIG_STATE: "failed"})
    ok, said = wait(layouts, before)
    assert not ok and f"failed to apply layout {LAYOUT}" in said

    mig_manager_says(api, **{MIG_CONFIG: None, MIG_CONFIG_STATE: "success"})
    ok, said = wait(layouts, before)
    assert not ok and "gone from the node" in said


def test_an_action_that_did_not_run_gets_the_state_back(api: ApiServer) -> None:
    layouts = mig_node(api, **{MIG_CONFIG: LAYOUT, MIG_CONFIG_STATE: "success"})
    before = layouts.ask_layout("n1")
    layouts.keep_layout("n1", before)
    assert labels(api)[MIG_CONFIG_STATE] == "success"


def test_the_managers_own_answer_since_is_kept(api: ApiServer) -> None:
    layouts = mig_node(api, **{MIG_CONFIG: LAYOUT, MIG_CONFIG_STATE: "success"})
    before = layouts.ask_layout("n1")
    mig_manager_says(api, **{MIG_CONFIG_STATE: "failed"})
    layouts.keep_layout("n1", before)
    assert labels(api)[MIG_CONFIG_STATE] == "failed"


def test_a_node_without_mig_instances_is_left_alone(api: ApiServer) -> None:
    layouts = mig_node(api, **{MIG_CONFIG: "all-disabled", MIG_CONFIG_STATE: "success"})
    assert not layouts.ask_layout("n1").has_instances
    assert labels(api)[MIG_CONFIG_STATE] == "success"


def test_dry_run_marks_nothing(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node(labels={MIG_CONFIG: LAYOUT, MIG_CONFIG_STATE: "success"})
    layouts = kube(api, dry_run=True).mig
    assert layouts is not None
    assert layouts.ask_layout("n1").has_instances
    assert labels(api)[MIG_CONFIG_STATE] == "success"
