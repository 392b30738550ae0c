"""Runbook schema, loader and matcher: broken files name file, line and field, and load nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from remedy.core.durations import format_duration, parse_duration
from remedy.core.models import Action, Finding, Severity
from remedy.runbook import DEFAULT_RUNBOOK, RunbookError, RunbookSet, load_runbooks

GOOD = """\
name: good
match:
  xids: [48]
tolerance: 1m
ladder:
  - action: reset_gpu
    timeout: 5m
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def problems(*paths: Path) -> list[str]:
    with pytest.raises(RunbookError) as caught:
        load_runbooks(paths)
    return [str(p) for p in caught.value.problems]


def finding(
    check: str = "xid",
    reason: str = "Xid48",
    xid: int | None = 48,
    severity: Severity = Severity.CRITICAL,
) -> Finding:
    return Finding(
        node="n1",
        check=check,
        reason=reason,
        xid=xid,
        severity=severity,
        observed_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_shipped_runbooks_load(shipped_runbooks: RunbookSet) -> None:
    assert len(shipped_runbooks) >= 10
    for runbook in shipped_runbooks:
        assert runbook.description, f"{runbook.name} needs a description"


@pytest.mark.parametrize(
    ("xid", "expected"),
    [
        (48, "gpu-memory-ecc"),
        (95, "gpu-memory-ecc"),
        (64, "gpu-row-remap-failure"),
        (79, "gpu-fallen-off-bus"),
        (62, "gpu-reset-class"),
        (119, "gpu-gsp"),
        (74, "nvlink"),
        (13, "application-xid"),
        (31, "application-xid"),
        (8, "hung-job"),
        # An Xid the catalog does not know: NVIDIA's contact support (cordon, hold).
        (999, "xid-needs-a-person"),
    ],
)
def test_each_fault_family_has_its_runbook(
    shipped_runbooks: RunbookSet, xid: int, expected: str
) -> None:
    runbook = shipped_runbooks.match(finding(reason=f"Xid{xid}", xid=xid))
    assert runbook is not None and runbook.name == expected


def test_application_faults_never_reach_hardware_actions(shipped_runbooks: RunbookSet) -> None:
    app = shipped_runbooks.get("application-xid")
    assert not {r.action for r in app.ladder} & {Action.RESET_GPU, Action.REBOOT, Action.REPLACE}
    assert app.cordon is False


def test_every_shipped_replace_needs_approval_after_a_diagnose(
    shipped_runbooks: RunbookSet,
) -> None:
    for runbook in shipped_runbooks:
        actions = [r.action for r in runbook.ladder]
        if Action.REPLACE in actions:
            assert runbook.ladder[-1].approval.value == "required", runbook.name
            # Admission ran two deep diagnoses; a blocklisted GPU's record is the evidence (a
            # diagnose it passed would put a repeat offender back in service).
            if runbook.name not in ("admission-failed", "blocklisted-serial"):
                assert actions[-2] is Action.DIAGNOSE, runbook.name


def test_good_runbook_loads_with_parsed_durations(tmp_path: Path) -> None:
    [runbook] = load_runbooks([write(tmp_path, "good.yaml", GOOD)])
    assert runbook.tolerance == timedelta(minutes=1)
    assert runbook.ladder[0].timeout == timedelta(minutes=5)
    assert runbook.ladder[0].verifies  # a reset is verified by default


def test_bad_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.yaml", "name: x\nmatch: {xids: [48]\nladder: []\n")
    [problem] = problems(path)
    assert problem.startswith(f"{path}:3: -: invalid YAML")


def test_unknown_action_names_line_and_field(tmp_path: Path) -> None:
    text = GOOD + "  - action: explode\n"
    [problem] = problems(path := write(tmp_path, "a.yaml", text))
    assert problem.startswith(f"{path}:8: ladder[1].action: Input should be 'diagnose'")


def test_negative_duration_names_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, "neg.yaml", GOOD.replace("tolerance: 1m", "tolerance: -5m"))
    assert problems(path) == [f"{path}:4: tolerance: duration must not be negative, got '-5m'"]


def test_missing_field_names_its_parent_line(tmp_path: Path) -> None:
    path = write(tmp_path, "missing.yaml", "name: lonely\nladder: []\n")
    assert problems(path) == [f"{path}:1: match: required field is missing"]


def test_misspelt_field_is_an_error_not_a_default(tmp_path: Path) -> None:
    path = write(tmp_path, "typo.yaml", GOOD.replace("tolerance:", "tolerence:"))
    assert problems(path) == [f"{path}:4: tolerence: unknown field"]


def test_duplicate_key_is_an_error_not_last_wins(tmp_path: Path) -> None:
    path = write(tmp_path, "dup.yaml", GOOD + "tolerance: 2m\n")
    assert problems(path) == [f"{path}:8: tolerance: duplicate key"]


def test_duplicate_runbook_name_across_files(tmp_path: Path) -> None:
    first = write(tmp_path, "a.yaml", GOOD)
    second = write(tmp_path, "b.yaml", GOOD)
    assert problems(first, second) == [
        f"{second}:1: name: duplicate runbook name 'good', first defined in {first}"
    ]


def test_application_cause_with_hardware_action_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, "app.yaml", GOOD.replace("tolerance: 1m", "cause: application"))
    [problem] = problems(path)
    assert problem.startswith(f"{path}:1: -: an application-caused fault must not reach")
    assert "reset_gpu" in problem


def test_replace_must_be_last_at_the_line_of_that_rung(tmp_path: Path) -> None:
    text = GOOD.replace("  - action: reset_gpu", "  - action: replace\n  - action: reset_gpu")
    [problem] = problems(path := write(tmp_path, "r.yaml", text))
    assert problem == (
        f"{path}:6: ladder[0]: replace must be the last rung: nothing runs after a replacement"
    )


def test_a_misspelt_action_gets_a_did_you_mean(tmp_path: Path) -> None:
    text = GOOD.replace("  - action: reset_gpu", "  - action: resett_gpu")
    [problem] = problems(path := write(tmp_path, "a.yaml", text))
    assert problem.startswith(f"{path}:6: ladder[0].action: Input should be 'diagnose'")
    assert problem.endswith("; did you mean 'reset_gpu'?")


@pytest.mark.parametrize("action", ["diagnose", "cordon"])
def test_an_approval_on_a_rung_that_takes_nothing_away_is_an_error(
    tmp_path: Path, action: str
) -> None:
    text = GOOD + f"  - action: {action}\n    approval: required\n"
    [problem] = problems(path := write(tmp_path, "a.yaml", text))
    assert problem == (
        f"{path}:9: ladder[1].approval: approval: required is for a rung that takes work away "
        "from the node (drain, kill_job, reset_gpu, reboot, replace, restart_fabric_manager); "
        f"{action} needs none"
    )


def test_a_secret_in_a_description_is_refused_and_loads_nothing(tmp_path: Path) -> None:
    # The description is copied as written into every finding's ladder and the Web UI.
    write(tmp_path, "a-good.yaml", GOOD)
    secret = GOOD.replace(
        "name: good\n",
        "name: leaky\ndescription: >-\n  Ask ops; the bucket key is\n  AKIAIOSFODNN7EXAMPLE.\n",
    )
    bad = write(tmp_path, "b-leaky.yaml", secret)
    assert problems(tmp_path) == [
        f"{bad}:2: description: holds what looks like a secret (aws-access-key): it would be "
        "copied into every finding's ladder and the Web UI; remove it"
    ]
    prose = GOOD.replace("name: good\n", "name: prose\ndescription: 'token: expired; reset'\n")
    (tmp_path / "ok").mkdir()
    [runbook] = load_runbooks([write(tmp_path / "ok", "prose.yaml", prose)])
    assert runbook.description == "token: expired; reset"


def test_unsafe_yaml_tag_is_refused_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = write(
        tmp_path, "evil.yaml", f"name: !!python/object/apply:os.system ['touch {marker}']\n"
    )
    [problem] = problems(path)
    assert problem.startswith(f"{path}:1: -: ")
    assert not marker.exists()


def test_one_bad_file_loads_nothing_and_reports_every_problem(tmp_path: Path) -> None:
    write(tmp_path, "a-good.yaml", GOOD)
    write(
        tmp_path,
        "b-bad.yaml",
        GOOD.replace("name: good", "name: other")
        .replace("reset_gpu", "nuke")
        .replace("1m", "soon"),
    )
    found = problems(tmp_path)
    assert len(found) == 2  # both errors of the bad file, and the good file is not returned
    assert {p.split(": ")[1] for p in found} == {"tolerance", "ladder[0].action"}


def test_empty_folder_is_an_error(tmp_path: Path) -> None:
    assert problems(tmp_path) == [f"{tmp_path}:1: -: no runbook files found"]


def test_most_specific_runbook_wins(tmp_path: Path) -> None:
    broad = write(tmp_path, "broad.yaml", "name: broad\nmatch: {checks: [xid]}\n")
    narrow = write(tmp_path, "narrow.yaml", GOOD)
    runbooks = RunbookSet(load_runbooks([broad, narrow]))
    assert runbooks.match(finding()).name == "good"  # type: ignore[union-attr]
    assert runbooks.match(finding(reason="Xid31", xid=31)).name == "broad"  # type: ignore[union-attr]


def test_equal_specificity_goes_to_priority_then_name(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", "name: a-first\nmatch: {xids: [48]}\n")
    b = write(tmp_path, "b.yaml", "name: b-second\nmatch: {xids: [48]}\n")
    assert RunbookSet(load_runbooks([a, b])).match(finding()).name == "a-first"  # type: ignore[union-attr]
    b.write_text("name: b-second\nmatch: {xids: [48]}\npriority: 5\n")
    assert RunbookSet(load_runbooks([a, b])).match(finding()).name == "b-second"  # type: ignore[union-attr]


def test_unknown_unhealthy_finding_gets_the_conservative_default() -> None:
    runbook = RunbookSet([]).match(finding(check="mystery", reason="Weird", xid=None))
    assert runbook is DEFAULT_RUNBOOK
    assert runbook.cordon and runbook.ladder == []  # cordon and hold; never replace


def test_informational_finding_needs_no_runbook() -> None:
    assert RunbookSet([]).match(finding(severity=Severity.INFO)) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("10m", 600),
        ("1h30m", 5400),
        ("2d", 172800),
        ("250ms", 0.25),
        (45, 45),
        ("0s", 0),
    ],
)
def test_durations_parse(text: str | int, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["soon", "10", "-1s", "1x", "", True, -3])
def test_bad_durations_are_refused(text: object) -> None:
    # A quoted number has no unit: refused rather than guessed (a bare YAML 10 means seconds).
    with pytest.raises(ValueError):
        parse_duration(text)


def test_duration_round_trip() -> None:
    assert format_duration(parse_duration("1h30m")) == "1h30m"
