"""remedy's alert rules (charts/remedy/files/remedy-alerts.rules.yaml) with the real promtool:
they parse, and each alert fires on synthetic series when it should, not before its ``for:``
and not when it should not (tests/alerts/remedy-alerts.test.yaml). Each names a runbook that is
a section of docs/operations.md."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml

from tests.generated_docs import ROOT
from tests.processes import Children
from tests.prometheus import RULES, RULES_TESTS, binary

# Each state issue 56 names has its alert.
ALERTS = {
    "RemedyBreakerTripped",
    "RemedyPoolHeldByPeople",
    "RemedyAgentsSilent",
    "RemedyControllerStalled",
    "RemedyLadderStuck",
    "RemedyNeedsHumanPilingUp",
    "RemedyGoodputFalling",
}


def promtool(processes: Children, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return processes.run([binary("promtool"), *args], timeout=60)


def rules(path: Path = RULES) -> list[dict[str, object]]:
    return [r for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]]


def test_the_rules_file_parses(processes: Children) -> None:
    checked = promtool(processes, "check", "rules", RULES)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout


def test_each_alert_fires_when_it_should_and_only_then(processes: Children) -> None:
    tested = promtool(processes, "test", "rules", RULES_TESTS)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    named = set(re.findall(r"alertname: (\w+)", RULES_TESTS.read_text()))
    assert named == ALERTS == {str(r["alert"]) for r in rules()}


def test_a_shorter_for_fails_the_tests(tmp_path: Path, processes: Children) -> None:
    """The tests hold the ``for:``: the breaker's firing at once is caught."""
    copied = tmp_path / "tests" / "alerts"
    copied.mkdir(parents=True)
    shutil.copy(RULES_TESTS, copied)
    rules_copy = tmp_path / RULES.relative_to(ROOT)
    rules_copy.parent.mkdir(parents=True)
    text = RULES.read_text()
    rules_copy.write_text(text.replace("for: 1m", "for: 0s", 1))
    tested = promtool(processes, "test", "rules", copied / RULES_TESTS.name)
    assert tested.returncode != 0
    assert "RemedyBreakerTripped" in tested.stdout + tested.stderr


def test_each_alert_has_a_runbook_section_in_the_docs() -> None:
    headings = re.findall(r"^#+ (.+)$", (ROOT / "docs/operations.md").read_text(), re.M)
    anchors = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
    for rule in rules():
        annotations = rule["annotations"]
        assert isinstance(annotations, dict)
        doc, _, anchor = str(annotations["runbook_url"]).partition("#")
        assert doc == "docs/operations.md" and anchor == f"alert-{str(rule['alert']).lower()}"
        assert anchor in anchors, f"docs/operations.md has no section #{anchor}"
