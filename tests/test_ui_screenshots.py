"""The README shows what `make ui-check` saw: every screenshot it keeps under docs/screenshots/,
and no image that is not there."""

from __future__ import annotations

import re

from tests.conftest import ROOT

SHOTS = ROOT / "docs" / "screenshots"


def test_the_readme_shows_every_ui_check_screenshot_and_only_those_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    shown = set(re.findall(r"!\[[^\]]*\]\((docs/screenshots/[^)]+)\)", readme))
    kept = {str(p.relative_to(ROOT)) for p in SHOTS.glob("*.png")}
    assert {"docs/screenshots/ui-fleet.png", "docs/screenshots/ui-ladder.png"} <= kept
    assert "docs/screenshots/ui-budget.png" in kept
    assert shown == kept


def test_make_test_does_not_run_the_browser_check() -> None:
    """`make ui-check` runs the demo for a minute and needs a Chromium: not in `make test`."""
    makefile = (ROOT / "Makefile").read_text()
    test_recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "ui_check" not in test_recipe and "ui-check" not in test_recipe
    assert re.search(r"^ui-check: \$\(UI_STAMP\)$", makefile, re.MULTILINE)
