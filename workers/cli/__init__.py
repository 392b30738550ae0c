"""The `remedy` command: the typer app assembled from the command groups, and its entry point.

The commands live by group: runbooks.py (`remedy runbooks ...`), xid.py (`remedy xid ...`),
node.py (probe, agent), doctor.py (doctor), controller.py (controller), demo.py (demo),
fleet.py (status, show), operate.py (approve, abort, clear), resume.py (resume-pool, release-hold,
resume-job), gpus.py (release-gpu), hold.py (resume-node), trigger.py (trigger), codec.py
(codec-server), manifests.py (render-manifests), ui.py (ui: the Web UI's views to save) and
signing.py (`remedy keys ...`, operators' keys); workers/flags declares the options they share
(and the agent's), common.py the helpers and connection.py the Temporal connection options
`remedy` takes before any command. A command parses its flags into settings and calls the
composition root (workers/providers) or the processes (workers/serving.py); it imports no
adapter."""

from __future__ import annotations

import os
import sys

import typer

from workers.cli import (
    codec,
    connection,
    controller,
    demo,
    doctor,
    fleet,
    gpus,
    hold,
    manifests,
    node,
    operate,
    resume,
    runbooks,
    signing,
    trigger,
    ui,
    xid,
)
from workers.cli.exits import RemedyGroup

# Help as click lays it out, not typer's rich panels (rich_markup_mode=None, inherited by every
# command and group): rich fits each option into one row of a six-column table and cuts a long
# name to the width left over ("--checkpoint-gra…" at 80 columns), where click puts the help of
# a long name on the next line and never cuts the name.
app = typer.Typer(
    cls=RemedyGroup,  # usage errors exit 1, as bad input does (exits.py)
    help="remedy keeps GPU fleets healthy.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.callback()(connection.temporal_options)
# Registered here, in the order `remedy --help` lists them.
app.command()(node.probe)
app.command()(node.agent)
app.command()(doctor.doctor)
app.command()(controller.controller)
app.command()(demo.demo)
app.command()(fleet.status)
app.command()(operate.approve)
app.command()(operate.abort)
app.command()(operate.clear)
app.command()(fleet.show)
app.command()(ui.ui)
app.command()(trigger.trigger)
app.command("resume-pool")(resume.resume_pool)
app.command("release-hold")(resume.release_hold)
app.command("release-gpu")(gpus.release_gpu)
app.command("resume-node")(hold.resume_node)
app.command("resume-job")(resume.resume_job)
app.command("codec-server")(codec.codec_server)
app.command("render-manifests")(manifests.render_manifests)
app.add_typer(runbooks.app, name="runbooks")
app.add_typer(xid.app, name="xid")
app.add_typer(signing.app, name="keys")


def main() -> None:
    """Run the app, then exit with its code without interpreter finalization (see below)."""
    try:
        app()
        code: int | str | None = 0
    except SystemExit as exc:
        code = exc.code
    # The Temporal core's native threads can outlive asyncio.run and crash interpreter
    # finalization ("PyGILState_Release ... finalizing"); everything is shut down and flushed
    # by now, so skip finalization instead of turning a clean exit into a core dump.
    sys.stdout.flush()
    sys.stderr.flush()
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    os._exit(code or 0)
