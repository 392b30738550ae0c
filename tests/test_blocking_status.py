"""`remedy status --blocking` with real ladders and the pool's real budget on the time-skipping
server: the holder waiting for its approval is named with the commands that free it, the ladder
behind it with its place in line, the breaker and the time of the read."""

from __future__ import annotations

import json
import uuid

from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from tests.conftest import running_workers
from tests.test_cli import cli
from tests.test_pool_held_by_people import (
    ONE_AT_A_TIME,
    details,
    held_and_waiting,
    replace_after_approval,
)


async def test_status_blocking_names_the_holder_its_commands_and_the_waiter_in_line(
    time_env: WorkflowEnvironment,
) -> None:
    client = time_env.client
    address = client.service_client.config.target_host
    fleet = SimFleet(nodes=3, pool=f"pool-{uuid.uuid4().hex[:8]}")
    first, second, _ = sorted(fleet.nodes)
    runbook = replace_after_approval()
    async with running_workers(client, fleet, policy=ONE_AT_A_TIME) as queues:
        pool = queues.pool
        await held_and_waiting(time_env, queues, fleet, runbook)
        asked = ("status", "--address", address, "--schedule", "none", "--pool", pool)
        code, text = await cli(*asked, "--blocking")
        json_code, raw = await cli(*asked, "--blocking", "--json")
        none_code, none_text = await cli(*asked[:-1], f"{pool}-none", "--blocking")
    assert code == 0, text
    lines = text.splitlines()
    assert lines[0].startswith(f"pool {pool}: 1/1 shares held, 1 waiting (read at 20")
    assert lines[1] == "  breaker: ok (2 unhealthy in the storm window)"
    assert "  ALERT people hold every share: nothing in the pool moves until they answer" in lines
    assert any(
        line.startswith(f"    {first}: a lease since ")
        and line.endswith("waits for approval for replace")
        for line in lines
    ), text
    assert f"        remedy approve {first}" in lines
    release = f"remedy release-hold {first} --pool {pool}"
    assert f"        remedy abort {first} --reason WHY && {release}" in lines
    assert f"    1. {second} (cordoned while it waits)" in lines
    assert json_code == 0
    [shown] = json.loads(raw)["pools"]
    assert [(h["node"], h["by_people"]) for h in shown["holders"]] == [(first, True)]
    assert [(w["position"], w["node"]) for w in shown["waiters"]] == [(1, second)]
    # A pool remedy does not know (no budget, no scan, no ladder): refused, not "nothing held".
    assert none_code != 0 and f"{pool}-none" in none_text, none_text


async def test_a_waiting_ladder_names_its_place_in_line_and_the_holders_ahead(
    time_env: WorkflowEnvironment,
) -> None:
    """`remedy show` of the waiter reads the budget once: its place, the holder ahead with
    what it waits for and the command that frees it; the waiter's own details say where the
    line is read (no signal to each waiter: their histories stay quiet)."""
    client = time_env.client
    address = client.service_client.config.target_host
    fleet = SimFleet(nodes=3, pool=f"pool-{uuid.uuid4().hex[:8]}")
    first, second, _ = sorted(fleet.nodes)
    async with running_workers(client, fleet, policy=ONE_AT_A_TIME) as queues:
        pool = queues.pool
        _, waiter = await held_and_waiting(time_env, queues, fleet, replace_after_approval())
        code, text = await cli("show", second, "--address", address)
        json_code, raw = await cli("show", second, "--address", address, "--json")
        said = await details(client, waiter.id)
    assert code == 0, text
    line = text.splitlines()[1].strip()
    assert line.startswith(
        f"waiting for a lease in pool {pool}: place 1 of 1; held by {first} "
        "(approval for replace since "
    ), text
    assert line.endswith(
        f"UTC: `remedy approve {first}`); people hold every share: nothing moves until they answer"
    ), text
    assert json_code == 0 and json.loads(raw)["in_line"] == line
    assert f"its place in line and who holds the pool: `remedy show {second}`" in said
    assert f"`remedy status --blocking --pool {pool}`" in said
