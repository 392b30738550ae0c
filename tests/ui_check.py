"""`make ui-check`: the demo, and Temporal's Web UI driven by a headless Chromium (Playwright
from PyPI, Debian's `chromium`: no browser download) — the fleet view `remedy ui` prints with
remedy's columns, a ladder's page, and the pool's budget naming its holders. Screenshots go to
docs/screenshots/ (the README shows them). Not part of `make test`: it runs the demo for a
minute or two.

Every process it starts (the demo, and through it the dev server with the UI) is stopped when
it ends, however it ends: Ctrl-C and SIGTERM end it by an exception, and ``Children`` stops each
process group and whatever moved out of it.

    python -m tests.ui_check [--out docs/screenshots] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from playwright.sync_api import ViewportSize, sync_playwright

from chaos.processes import sigterm_as_interrupt
from remedy.disruption.blocking import Blocking
from tests import ui_pages
from tests.processes import Children, free_port
from workers.blocking_status import pools_blocking
from workers.client import connect

ROOT = Path(__file__).resolve().parent.parent
REMEDY = str(Path(sys.executable).parent / "remedy")
POOL = "default"
READY_S = 240.0  # for the demo's server; for a ladder to hold a share, waiting for people
UI_LINE = "Temporal Web UI  "
VIEWPORT = ViewportSize(width=1920, height=1000)  # remedy's seven columns without scrolling


def main() -> int:
    args = _parse()
    args.out.mkdir(parents=True, exist_ok=True)
    with (
        sigterm_as_interrupt(),
        tempfile.TemporaryDirectory(prefix="remedy-ui-check-") as tmp,
        Children() as children,
    ):
        address, ui = _start_demo(children, Path(tmp))
        held = _holders(children, address)
        print(f"pool {POOL}: held by {', '.join(h.node for h in held.holders)}", flush=True)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, headless=True)
            try:
                page = browser.new_page(viewport=VIEWPORT)
                headers = ui_pages.fleet_view(page, ui, args.out)
                print(f"fleet view: columns {', '.join(h for h in headers if h)}", flush=True)
                node = next(h.node for h in held.holders if h.by_people)
                ui_pages.ladder_page(page, ui, node, args.out)
                print(f"ladder page: node-remediation/{node}", flush=True)
                # Read again just before: a ladder may have given its share back meanwhile.
                held = _holders(children, address)
                ui_pages.budget_page(page, ui, held, args.out)
                print(f"budget page: names {', '.join(h.node for h in held.holders)}", flush=True)
            finally:
                browser.close()
    print(f"screenshots in {args.out}")
    return 0


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.ui_check", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument(
        "--chromium",
        default=shutil.which("chromium") or shutil.which("chromium-browser"),
        help="the Chromium to drive (default: Debian's, on PATH)",
    )
    args = parser.parse_args()
    if not args.chromium:
        parser.error("no chromium on PATH: apt-get install chromium, or pass --chromium PATH")
    return args


def _start_demo(children: Children, tmp: Path) -> tuple[str, str]:
    """`remedy demo` on free ports with a fresh database; its server's and UI's addresses once
    it says the UI is up."""
    port, ui_port = free_port(), free_port()
    log = tmp / "demo.log"
    with log.open("w") as out:
        demo = children.start(
            [REMEDY, "demo", "--port", str(port), "--ui-port", str(ui_port),
             "--db", str(tmp / "temporal.sqlite"), "--duration", "900"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
        )  # fmt: skip
    deadline = time.monotonic() + READY_S
    while UI_LINE not in log.read_text():
        if demo.poll() is not None or time.monotonic() > deadline:
            raise ui_pages.UiCheckFailed(f"the demo did not start its UI:\n{log.read_text()}")
        time.sleep(0.2)  # the demo's own startup: nothing to wait on but its output
    ui = log.read_text().split(UI_LINE, 1)[1].split("/namespaces", 1)[0]
    print(f"demo: server 127.0.0.1:{port}, UI {ui}, log {log}", flush=True)
    return f"127.0.0.1:{port}", ui


def _holders(children: Children, address: str) -> Blocking:
    """``_wait_for_holders`` on a thread of its own: Playwright's sync API runs an event loop in
    this one."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, _wait_for_holders(children, address)).result()


async def _wait_for_holders(children: Children, address: str) -> Blocking:
    """The pool's budget once a ladder holds a share and waits for people (an approval): what
    the pages must show, and it stays so until someone acts or the approval times out. The
    demo's fault rate trips the pool's breaker; the check resumes it as an operator would, so
    that ladders get their shares."""
    client = await connect(address)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + READY_S
    while loop.time() < deadline:
        read = await pools_blocking(client, "remedy-fleet-scan", POOL)
        if read.pools and any(h.by_people for h in read.pools[0].holders):
            return read.pools[0]
        if read.tripped:
            resume = [REMEDY, "resume-pool", POOL, "--address", address, "--by", "ui-check"]
            children.run(resume, timeout=60)  # exit 2: resumed meanwhile
        await asyncio.sleep(1.0)  # the budget's next grant: polled, as `remedy status` would
    raise ui_pages.UiCheckFailed(f"no share of pool {POOL} held for people in {READY_S:g}s")


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt as stop:  # everything it started is stopped by now
        print(f"ui-check: interrupted ({stop}); stopped the demo", file=sys.stderr)
        raise SystemExit(130) from None
