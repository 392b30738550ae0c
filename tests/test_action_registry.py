"""The workers register the ladder's actions from the action table (activities/table.py): each
row's activity is the method named as the action, on the side the row says, and a row with no
such method fails when the worker is built, naming the action."""

from __future__ import annotations

import pytest

from activities.cluster import NodeControlActivities
from activities.node import NodeActivities
from activities.table import action_activities
from adapters.sim import SimFleet
from remedy.core.actions import ACTIONS, Where


def test_each_row_is_registered_on_its_side_by_its_name() -> None:
    fleet = SimFleet(nodes=1)
    node = {f.__name__ for f in NodeActivities(fleet.host).all()}
    assert {a.value for a, s in ACTIONS.items() if s.where is Where.NODE} <= node
    control = NodeControlActivities(fleet.cluster.control)
    with pytest.raises(TypeError, match="no activity implements it: add a method replace"):
        action_activities(Where.CLUSTER, control)  # the replacer's class left out


def test_a_row_without_its_activity_fails_naming_it() -> None:
    class Partial:
        def diagnose(self) -> None: ...

    with pytest.raises(TypeError, match="runs reset_gpu node-side but no activity"):
        action_activities(Where.NODE, Partial())
