"""What `make ui-check` looks at in Temporal's Web UI, headless: the fleet view `remedy ui`
prints (with remedy's columns added), a ladder's page, and its pool's budget naming who holds
the shares. Each step asserts on what the page shows and leaves a screenshot.

The UI renders a workflow's summary and current details (Markdown) on its "User Metadata" tab,
the current details inside an iframe: the text is read from every frame of the page."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from playwright.sync_api import Page

from remedy.disruption.blocking import Blocking
from remedy.ladder.remediation import Phase
from workers.ui_views import VIEWS, list_url

NAMESPACE = "default"
# The default columns an operator drops to see remedy's without scrolling: the workflow id
# names the node and the type, and the Start and End of a run say less than RemedyPhaseSince.
ROOM_FOR_OURS = ["Run ID", "Type", "Start", "End"]
WAIT_MS = 30_000  # for the UI to show what the server already has (it polls, then renders)
LOADS = 5  # of a workflow's page, for its details to show what the check read just before
RENDER_POLLS = 10  # of its frames, half a second apart


class UiCheckFailed(AssertionError):
    pass


def fleet_view(page: Page, ui: str, out: Path) -> list[str]:
    """The first view `remedy ui` prints, its columns added as an operator would (Configure
    Columns); the column headers the list then shows."""
    view = VIEWS[0]
    page.goto(list_url(ui, NAMESPACE, view.query))
    page.get_by_test_id("workflows-summary-table-configuration-button").click()
    for column in ROOM_FOR_OURS:
        page.get_by_test_id(f"orderable-list-item-{column}-remove-button").click()
    for column in view.columns:
        page.get_by_test_id(f"orderable-list-item-{column}-add-button").click()
    page.get_by_test_id("drawer-close-button").click()
    page.get_by_test_id("table-maximize-button").click()  # the whole window for the table
    page.locator("table tbody tr").first.wait_for(timeout=WAIT_MS)
    page.get_by_text("node-remediation/").first.wait_for(timeout=WAIT_MS)
    headers = [h.strip() for h in page.locator("table thead th").all_inner_texts()]
    missing = [c for c in view.columns if c not in headers]
    if missing:
        raise UiCheckFailed(f"the fleet view lacks the columns {missing}: {headers}")
    width = page.viewport_size["width"] if page.viewport_size else 0
    last = page.locator("table thead th", has_text=view.columns[-1]).bounding_box()
    if last is None or last["x"] + last["width"] > width:
        raise UiCheckFailed(f"{view.columns[-1]} is off screen ({last}, the page {width} wide)")
    rows = page.locator("table tbody").inner_text()
    if not any(phase.value in rows for phase in Phase):
        raise UiCheckFailed(f"no ladder's phase in the fleet view's rows:\n{rows[:2000]}")
    page.mouse.move(0, 0)  # no tooltip over the table
    page.locator("table").screenshot(path=out / "ui-fleet.png")
    return headers


def ladder_page(page: Page, ui: str, node: str, out: Path) -> str:
    """A NodeRemediation's page: its summary and current details (what it does, the rung,
    what it waits for, the commands)."""
    text = _details(page, ui, f"node-remediation/{node}", must_show=[f"{node}:", "Rung"])
    page.screenshot(path=out / "ui-ladder.png")
    return text


def budget_page(page: Page, ui: str, read: Blocking, out: Path) -> str:
    """The pool's DisruptionBudget page: its details show the breaker, and name each holder
    that people hold (as ``read`` from the budget before) with the command that frees it."""
    held = [h for h in read.holders if h.by_people]
    must = ["Breaker", "Holders ("] + [h.node for h in held] + [h.commands[0] for h in held]
    text = _details(page, ui, f"disruption-budget/{read.pool}", must_show=must)
    page.screenshot(path=out / "ui-budget.png")
    return text


def _details(page: Page, ui: str, workflow_id: str, must_show: list[str]) -> str:
    """The workflow's User Metadata tab, once its text holds every string of ``must_show``. The
    current details are those of when the page loaded: a page that lacks one is loaded again."""
    base = f"{ui.rstrip('/')}/namespaces/{NAMESPACE}/workflows/{quote(workflow_id, safe='')}"
    text = ""
    for _ in range(LOADS):
        page.goto(base)
        page.wait_for_url(f"{base}/*/*", timeout=WAIT_MS)  # to the latest run's page
        page.goto(page.url.rsplit("/", 1)[0] + "/user-metadata")
        page.get_by_text("Current Details").first.wait_for(timeout=WAIT_MS)
        for _ in range(RENDER_POLLS):
            text = "\n".join(_frame_texts(page))
            if all(s in text for s in must_show):
                return text
            page.wait_for_timeout(500)  # the details' iframe fills in after the tab renders
    missing = [s for s in must_show if s not in text]
    raise UiCheckFailed(f"{workflow_id}'s page does not show {missing}:\n{text[-3000:]}")


def _frame_texts(page: Page) -> list[str]:
    texts = []
    for frame in page.frames:
        try:
            texts.append(frame.locator("body").inner_text(timeout=1000))
        except Exception:  # noqa: BLE001 - a frame navigating away has no body to read
            continue
    return texts
