"""Record a pool budget's first run through a burst of reports past the suggestion to continue
as new (the dev server's, at 40 events; the burst of tests/test_budget_renewal.py), for
tests/test_replay.py: ``budget_continued_at_suggestion.json`` was recorded on the code before
workflows/budget_renewal.py, ``budget_continued_when_quiet.json`` on the code since.

    .venv/bin/python -m tests.histories.record_continued budget_continued_when_quiet
"""

from __future__ import annotations

import argparse
import asyncio

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from contract import search_attributes
from tests.conftest import SUGGEST_CONTINUE_AS_NEW_AT
from tests.histories.record import HERE
from tests.test_budget_renewal import burst_past_the_suggestion
from workers.binaries import installed_binary
from workers.client import ensure_search_attributes


async def main(name: str) -> None:
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=installed_binary("temporal"),
        search_attributes=search_attributes.ALL,
        dev_server_extra_args=[
            "--dynamic-config-value",
            f"limit.historyCount.suggestContinueAsNew={SUGGEST_CONTINUE_AS_NEW_AT}",
        ],
    )
    try:
        await ensure_search_attributes(env.client)
        history = await (await burst_past_the_suggestion(env.client)).fetch_history()
    finally:
        await env.shutdown()
    (HERE / f"{name}.json").write_text(history.to_json())
    print(f"recorded {name}: {len(history.events)} events")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="the file's name, without .json")
    asyncio.run(main(parser.parse_args().name))
