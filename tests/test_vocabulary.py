"""The registry of checks and reasons: runbooks that name what no check reports are refused
with file, line and field; everything remedy's code reports is in the registry; editors get the
names from the schema; and the action table is what the docs show."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from adapters.sim import FAULTS, SimFleet
from remedy.core.actions import ACTIONS
from remedy.core.models import Action, Finding, Severity
from remedy.detection import vocabulary
from remedy.detection.probe import checks, probe_node
from remedy.detection.probe.diagnose import deep_diagnose
from remedy.detection.probe.load import LOAD, LOAD_CHECK, LoadReason
from remedy.detection.probe.nic_check import NIC
from remedy.detection.probe.nic_link import NIC_LINK
from remedy.detection.probe.nic_log import NIC_DRIVER
from remedy.detection.probe.runner import KERNEL_LOG, PROBE
from remedy.detection.probe.sxids import NVSWITCH
from remedy.ladder.remediation import FindingReport
from remedy.runbook import RunbookError, load_runbooks
from remedy.runbook.schema import json_schema
from remedy.scan.admission import ADMISSION_FAILED
from tests.conftest import ROOT
from workers.cli import app

TYPO_CHECK = """name: ecc
match:
  - xids: [48]
  - checks: [memroy]
ladder:
  - action: reset_gpu
"""
TYPO_REASON = """name: ecc
match: {checks: [memory], reasons: [EccUncorrectable, EccUncorectable]}
ladder:
  - action: reset_gpu
"""


def validate(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    path = tmp_path / "ecc.yaml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["runbooks", "validate", str(path)])
    return result.exit_code, result.output.splitlines()


def test_validate_rejects_an_unknown_check_with_file_line_and_field(tmp_path: Path) -> None:
    code, lines = validate(tmp_path, TYPO_CHECK)
    assert code == 1
    assert lines[0] == (
        f"{tmp_path}/ecc.yaml:4: match[1].checks[0]: unknown check 'memroy' "
        "(did you mean 'memory'?)"
    )


def test_validate_rejects_an_unknown_reason_with_file_line_and_field(tmp_path: Path) -> None:
    code, lines = validate(tmp_path, TYPO_REASON)
    assert code == 1
    assert lines[0] == (
        f"{tmp_path}/ecc.yaml:2: match.reasons[1]: unknown reason 'EccUncorectable' "
        "(did you mean 'EccUncorrectable'?)"
    )
    assert len(lines) == 1  # one problem, one line


def test_a_name_far_from_any_gets_the_list_instead(tmp_path: Path) -> None:
    _, lines = validate(tmp_path, TYPO_CHECK.replace("memroy", "gpu_stuff"))
    assert "unknown check 'gpu_stuff'; known: admission, " in lines[0]
    assert "fabric_manager, hardware, inventory, job, kernel_log" in lines[0]


def test_a_reason_the_listed_checks_never_report_is_a_clause_that_cannot_match(
    tmp_path: Path,
) -> None:
    text = TYPO_REASON.replace("EccUncorectable", "NicPortDown")
    _, lines = validate(tmp_path, text)
    assert lines[0].startswith(f"{tmp_path}/ecc.yaml:2: match: reasons ['NicPortDown'] ")
    assert "can never match" in lines[0]


def test_any_xid_is_a_reason_even_one_the_catalog_lacks(tmp_path: Path) -> None:
    code, lines = validate(
        tmp_path,
        TYPO_REASON.replace("EccUncorectable", "Xid48")
        .replace("checks: [memory], ", "")
        .replace("reasons: [EccUncorrectable, ", "reasons: [Xid999, "),
    )
    assert code == 0, lines


def test_a_runbook_inside_a_message_is_not_held_to_this_workers_vocabulary() -> None:
    """A newer remedy may know a check this worker does not: its reports must still decode."""
    [runbook] = load_runbooks([ROOT / "runbooks" / "nic-degraded.yaml"])
    wire = FindingReport(
        finding=Finding(
            node="n",
            check="nic",
            reason="NicPortDown",
            severity=Severity.CRITICAL,
            observed_at=datetime.now(UTC),
        ),
        runbook=runbook,
    ).model_dump(mode="json")
    wire["runbook"]["match"][0]["checks"] = ["nic", "nic_firmware"]
    assert FindingReport.model_validate(wire).runbook.match[0].checks == ["nic", "nic_firmware"]


def test_the_schema_lists_checks_and_reasons_for_editors() -> None:
    schema = json_schema()
    doc = yaml.safe_load(TYPO_REASON.replace(", EccUncorectable", ""))
    jsonschema.validate(doc, schema)
    for bad in ({"checks": ["memroy"]}, {"reasons": ["EccUncorectable"]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**doc, "match": bad}, schema)
    jsonschema.validate({**doc, "match": {"reasons": ["Xid999"]}}, schema)
    described = str(schema)
    assert "'const': 'EccUncorrectable', 'description': 'uncorrectable ECC errors" in described


def test_every_shipped_runbook_names_only_known_terms() -> None:
    for runbook in load_runbooks([ROOT / "runbooks"]):
        for clause in runbook.match:
            assert all(vocabulary.check_of(r) for r in clause.reasons), runbook.name


# -- what the code reports is in the registry ----------------------------------------------
def _reported(finding: Finding) -> tuple[str, str]:
    return finding.check, finding.reason


def test_every_simulated_fault_reports_registered_terms() -> None:
    fleet = SimFleet(nodes=len(FAULTS) + 1, gpus_per_node=2)
    nodes = sorted(fleet.nodes)
    seen: set[tuple[str, str]] = set()
    for node, (kind, spec) in zip(nodes, FAULTS.items(), strict=False):
        seen.add((spec.check, spec.reason))
        fleet.inject(node, kind, 0)
        host = fleet.host(node)
        seen |= {_reported(f) for f in deep_diagnose(host, [], host.probe_config).findings}
    broken = nodes[-1]
    fleet.break_nvml(broken, "missing")
    host = fleet.host(broken)
    seen |= {_reported(f) for f in probe_node(broken, host.nvml(), host.probe_config).findings}
    assert ("probe", "NvmlUnavailable") in seen and ("probe", "CheckTimedOut") in seen
    for check, reason in seen:
        assert check in vocabulary.checks(), check
        assert vocabulary.check_of(reason) == check, (check, reason)


PRODUCERS = ["remedy", "activities", "workflows", "workers", "adapters"]


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def test_every_finding_the_code_makes_uses_registered_terms() -> None:
    """Findings made with literal names anywhere in the product — ``Finding(check=..,
    reason=..)``, ``ctx.finding("check", "Reason", ..)`` — and the probe's reason tables."""
    made: list[tuple[str, str, str]] = []
    for package in PRODUCERS:
        for path in (ROOT / package).rglob("*.py"):
            for call in ast.walk(ast.parse(path.read_text())):
                if not isinstance(call, ast.Call):
                    continue
                name = getattr(call.func, "attr", getattr(call.func, "id", ""))
                kw = {k.arg: k.value for k in call.keywords}
                if name == "Finding" and _literal(kw.get("check")):
                    reason = _literal(kw.get("reason"))
                    made.append((str(path), str(_literal(kw.get("check"))), reason or ""))
                elif name == "finding" and len(call.args) >= 2 and _literal(call.args[0]):
                    made.append(
                        (str(path), str(_literal(call.args[0])), _literal(call.args[1]) or "")
                    )
    assert len(made) >= 8  # admission, the job guard, the fleet scan, the CLI, the Xids
    for path, check, reason in made:
        assert check in vocabulary.checks(), (path, check)
        assert check not in {t.check for t in OWNED}, (path, check)  # its own names, not literals
        if reason:  # a reason held in a variable is covered by the tables and the sim above
            assert vocabulary.check_of(reason) == check, (path, check, reason)
    assert vocabulary.check_of(ADMISSION_FAILED) == "admission"
    # The load test's reasons are an enum its engines (DCGM, torch, cupy) pick from.
    assert all(vocabulary.check_of(r.value) == LOAD_CHECK for r in LoadReason)


# The checks that declare their terms beside their code (remedy/detection/check_terms.py).
OWNED = (*checks.TERMS, NIC, NIC_LINK, NIC_DRIVER, KERNEL_LOG, PROBE, LOAD, NVSWITCH)


def test_a_check_owns_its_terms_each_spelt_once() -> None:
    """Each reason of a check that owns its terms is spelt once in the product, where the check
    declares it; the vocabulary gathers the check's terms, it does not repeat them."""
    spelt: dict[str, list[str]] = {}
    for package in PRODUCERS:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    spelt.setdefault(node.value, []).append(str(path.relative_to(ROOT)))
    for terms in OWNED:
        assert vocabulary.checks()[terms.check] is terms
        for reason in terms.reasons:
            assert len(spelt.get(reason, [])) == 1, (reason, spelt.get(reason))
    assert all(t.reasons for t in OWNED)


# -- the action table ----------------------------------------------------------------------
def test_every_action_is_in_the_table_and_restore_is_no_rung(tmp_path: Path) -> None:
    assert set(ACTIONS) == set(Action)
    (tmp_path / "r.yaml").write_text(
        TYPO_REASON.replace("reset_gpu", "restore").replace(", EccUncorectable", "")
    )
    with pytest.raises(RunbookError, match="restore is not a rung"):
        load_runbooks([tmp_path])
