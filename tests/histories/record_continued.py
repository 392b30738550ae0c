"""Record a pool budget's first run through a burst of reports past the suggestion to continue
as new (the dev server's, at 40 events; the burst of tests/test_budget_renewal.py). Its two
histories (the budget before workflows/budget_renewal.py and since) were replayed until 0.13.0,
which supports 0.12.0's histories only (tests/test_replay.py).

    .venv/bin/python -m tests.histories.record_continued budget_continued_when_quiet
"""

from __future__ import annotations

import argparse
import asyncio

from tests.conftest import start_dev_server
from tests.histories.record import HERE
from tests.test_budget_renewal import burst_past_the_suggestion
from workers.client import ensure_search_attributes


async def main(name: str) -> None:
    env = await start_dev_server()
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
