"""The embedded demo's history: a fresh database each run, or the last run's with ``--resume``.

A run that went on with the last one's database would start with its ladders still holding
disruption leases and its job guards still holding jobs; so, unless resumed, the old database
(and the dev server's log beside it) is kept once, as ``NAME.previous.sqlite``, and the server
starts on an empty one."""

from __future__ import annotations

from pathlib import Path

# SQLite's own files beside the database: a rollback journal, or a write-ahead log and its index.
SIDECARS = ("-journal", "-wal", "-shm")


def server_log(db: Path) -> Path:
    """The dev server's log, beside its database."""
    return db.with_suffix(".log")


def previous(db: Path) -> Path:
    """Where a fresh run keeps the last run's database: ``temporal.previous.sqlite``."""
    return db.with_name(f"{db.stem}.previous{db.suffix}")


def prepare_history(db: Path, *, resume: bool) -> str:
    """Make ``db`` what the run starts on, before the dev server opens it, and say which, e.g.
    ``fresh: .demo/temporal.sqlite (the last run's is .demo/temporal.previous.sqlite; ...)``."""
    db.parent.mkdir(parents=True, exist_ok=True)
    if resume:
        if db.exists():
            return f"resumed: {db}, the last run's workflows go on (leases, holds, ladders)"
        return f"nothing to resume at {db}: a fresh database"
    if not db.exists():
        return f"fresh: {db} (a later run with --resume goes on from it)"
    kept = previous(db)
    for suffix in ("", *SIDECARS):
        _move(db.with_name(db.name + suffix), kept.with_name(kept.name + suffix))
    _move(server_log(db), server_log(kept))
    return f"fresh: {db} (the last run's is {kept}; --resume goes on with it)"


def _move(source: Path, target: Path) -> None:
    """``source`` becomes ``target``; with no ``source``, an older ``target`` goes (a sidecar
    of an older run must not pair with the database kept now)."""
    if source.exists():
        source.replace(target)
    else:
        target.unlink(missing_ok=True)
