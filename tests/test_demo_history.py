"""The embedded demo's database: fresh each run, the last one's kept once; resumed on demand."""

from __future__ import annotations

from pathlib import Path

from workers.demo_history import prepare_history


def _files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def test_a_first_run_starts_fresh_in_a_folder_it_makes(tmp_path: Path) -> None:
    db = tmp_path / ".demo" / "temporal.sqlite"
    said = prepare_history(db, resume=False)
    assert said == f"fresh: {db} (a later run with --resume goes on from it)"
    assert db.parent.is_dir() and not db.exists()


def test_a_second_run_keeps_the_last_database_and_log_aside_and_starts_empty(
    tmp_path: Path,
) -> None:
    db = tmp_path / "temporal.sqlite"
    db.write_text("run 2")
    (tmp_path / "temporal.sqlite-wal").write_text("run 2's wal")
    (tmp_path / "temporal.log").write_text("run 2's log")
    # What the run before kept: replaced, and its sidecar must not pair with run 2's database.
    (tmp_path / "temporal.previous.sqlite").write_text("run 1")
    (tmp_path / "temporal.previous.sqlite-shm").write_text("run 1's shm")

    said = prepare_history(db, resume=False)

    kept = tmp_path / "temporal.previous.sqlite"
    assert said == f"fresh: {db} (the last run's is {kept}; --resume goes on with it)"
    assert _files(tmp_path) == {
        "temporal.previous.log": "run 2's log",
        "temporal.previous.sqlite": "run 2",
        "temporal.previous.sqlite-wal": "run 2's wal",
    }


def test_resume_goes_on_with_the_database_as_it_is(tmp_path: Path) -> None:
    db = tmp_path / "temporal.sqlite"
    db.write_text("run 1")
    (tmp_path / "temporal.log").write_text("run 1's log")

    said = prepare_history(db, resume=True)

    assert said == f"resumed: {db}, the last run's workflows go on (leases, holds, ladders)"
    assert _files(tmp_path) == {"temporal.log": "run 1's log", "temporal.sqlite": "run 1"}


def test_resume_with_nothing_to_resume_says_so(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    assert prepare_history(db, resume=True) == f"nothing to resume at {db}: a fresh database"
