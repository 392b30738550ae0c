"""workers/versioning.py: the controller's version, off unless switched on, and each workflow's
behaviour given to versioned workers only (tests/test_rollout.py rolls one on the dev server)."""

from __future__ import annotations

from importlib.metadata import version

import pytest
from temporalio import workflow
from temporalio.common import VersioningBehavior

from workers import versioning
from workers.controller import WORKFLOWS


def _definition(cls: type) -> workflow._Definition:
    return workflow._Definition.must_from_class(cls)


def test_off_unless_switched_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(versioning.SWITCH, raising=False)
    assert versioning.deployment_config() is None
    assert versioning.behaving(WORKFLOWS, None) == WORKFLOWS  # as they are: unversioned
    monkeypatch.setenv(versioning.SWITCH, "on")
    config = versioning.deployment_config()
    assert config is not None and config.use_worker_versioning
    assert config.version.deployment_name == "remedy"


def test_the_build_id_is_the_package_version_unless_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(versioning.BUILD_ID, raising=False)
    # the installed package's metadata (pyproject.toml's version when it was installed: an
    # image's build; a checkout's `pip install -e .`)
    assert versioning.current_version().build_id == version("remedy")
    monkeypatch.setenv(versioning.BUILD_ID, "0.13.0-rc1")
    assert versioning.current_version().build_id == "0.13.0-rc1"
    assert versioning.current_version("given").build_id == "given"


def test_every_controller_workflow_has_its_behavior_under_its_own_name() -> None:
    config = versioning.deployment_config("b", enabled=True)
    versioned = versioning.behaving(WORKFLOWS, config)
    pinned = {"NodeRemediation", "ActiveChecks", "ActiveCheck", "NodeAdmission"}
    pinned |= {"GpuRelease", "HoldRelease"}
    for original, sub in zip(WORKFLOWS, versioned, strict=True):
        before, after = _definition(original), _definition(sub)
        assert issubclass(sub, original) and after.name == before.name
        assert before.versioning_behavior is VersioningBehavior.UNSPECIFIED  # the dev server
        expected = "PINNED" if before.name in pinned else "AUTO_UPGRADE"
        assert after.versioning_behavior is VersioningBehavior[expected], before.name
        assert set(after.signals) == set(before.signals)
        assert set(after.updates) == set(before.updates)
        assert set(after.queries) == set(before.queries)
    assert versioning.behaving(WORKFLOWS, config) == versioned  # one subclass each, kept
