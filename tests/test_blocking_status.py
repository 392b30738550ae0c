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
from tests.test_pool_held_by_people import ONE_AT_A_TIME, held_and_waiting, replace_after_approval


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
        none_code, _ = await cli(*asked[:-1], f"{pool}-none", "--blocking")
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
    assert none_code == 0  # a pool that never asked for a lease: nothing held, said so
