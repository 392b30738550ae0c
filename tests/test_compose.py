"""docker-compose.yml and the Dockerfile, checked without a Docker engine: the services, their
order (health checks and one-shot setup jobs), the ports, the files they mount, the remedy
commands they run, and the setup script run for real against a Temporal server."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import typer
import yaml
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from contract import search_attributes
from tests.conftest import ROOT
from tests.processes import Children
from tests.servers import STARTUP, started
from workers.binaries import installed_binary
from workers.cli import app

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
SETUP_SCRIPT = ROOT / "deploy/compose/setup-temporal.sh"


def depends(service: str) -> dict[str, str]:
    return {name: spec["condition"] for name, spec in SERVICES[service]["depends_on"].items()}


def test_services_start_in_order_behind_health_checks_and_one_shot_setup() -> None:
    assert set(SERVICES) == {
        "postgresql",
        "temporal-schema",
        "temporal",
        "temporal-setup",
        "temporal-ui",
        "remedy",
        "remedy-controller",
    }
    assert depends("temporal-schema") == {"postgresql": "service_healthy"}
    assert depends("temporal") == {"temporal-schema": "service_completed_successfully"}
    assert depends("temporal-setup") == {"temporal": "service_healthy"}
    assert depends("temporal-ui") == {"temporal": "service_healthy"}
    assert depends("remedy") == {"temporal-setup": "service_completed_successfully"}
    for name in ("postgresql", "temporal", "remedy", "remedy-controller"):
        assert SERVICES[name]["healthcheck"]["test"], name
    assert SERVICES["remedy-controller"]["profiles"] == ["kubernetes"]  # not on by default


def test_current_temporal_images_not_the_deprecated_auto_setup() -> None:
    images = {name: s.get("image", "") for name, s in SERVICES.items()}
    assert not any("auto-setup" in image for image in images.values())
    assert images["temporal"].startswith("temporalio/server:")
    assert images["temporal-schema"].startswith("temporalio/admin-tools:")
    assert images["temporal-setup"].startswith("temporalio/admin-tools:")
    assert images["temporal-ui"].startswith("temporalio/ui:")
    assert SERVICES["temporal"]["environment"]["DB"] == "postgres12"
    assert SERVICES["remedy"]["build"] == "."


def test_ports_are_published() -> None:
    published = {
        name: [p.split(":")[0] for p in s.get("ports", [])] for name, s in SERVICES.items()
    }
    assert published["temporal"] == ["7233"]
    assert published["temporal-ui"] == ["8080"]
    assert published["remedy"] == ["9464"]
    assert "postgresql" not in [n for n, ports in published.items() if ports]  # stays inside


def test_every_mounted_file_exists() -> None:
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
    config = SERVICES["temporal"]["environment"]["DYNAMIC_CONFIG_FILE_PATH"]
    assert (ROOT / "deploy/compose/dynamicconfig" / Path(config).name).exists()


def _cli_options(words: list[str]) -> tuple[Any, list[str]]:
    command: Any = typer.main.get_command(app)
    rest = list(words)
    while rest and rest[0] in getattr(command, "commands", {}):
        command = command.commands[rest.pop(0)]
    return command, [w for w in rest if w.startswith("--")]


def test_the_remedy_commands_exist_with_those_options() -> None:
    deploy = [
        d
        for f in sorted((ROOT / "deploy").glob("*.yaml"))
        for d in yaml.safe_load_all(f.read_text())
        if d and d.get("kind") in ("Deployment", "DaemonSet")
    ]
    commands = [
        SERVICES["remedy"]["command"],
        SERVICES["remedy-controller"]["command"],
        *(d["spec"]["template"]["spec"]["containers"][0]["args"] for d in deploy),
    ]
    for words in commands:
        command, options = _cli_options(words)
        known = {opt for param in command.params for opt in param.opts}
        assert command.name in ("demo", "controller", "agent"), words
        assert set(options) <= known, f"{words}: unknown {set(options) - known}"
    for name in ("remedy", "remedy-controller"):  # the health check scrapes the bound port
        service = SERVICES[name]
        port = service["command"][service["command"].index("--metrics-bind") + 1].split(":")[1]
        assert f":{port}/metrics" in " ".join(service["healthcheck"]["test"])


def test_dockerfile_copies_what_exists_and_runs_the_cli() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11", text, re.M)
    for source in re.findall(r"^COPY (\S+)", text, re.M):
        assert (ROOT / source).exists(), source
    assert "COPY runbooks runbooks" in text
    assert 'ENTRYPOINT ["remedy"]' in text
    assert re.search(r"^USER \d+", text, re.M)


def test_setup_script_registers_every_search_attribute_remedy_sets() -> None:
    pairs = re.findall(r"^add (\w+) (\w+)$", SETUP_SCRIPT.read_text(), re.M)
    assert sorted(pairs) == sorted(
        (k.name, search_attributes.cli_type(k)) for k in search_attributes.ALL
    )


async def test_setup_script_runs_against_a_real_server(processes: Children) -> None:
    env = await started(  # a server that knows none of them yet
        lambda: WorkflowEnvironment.start_local(
            data_converter=pydantic_data_converter,
            dev_server_existing_path=installed_binary("temporal"),
            dev_server_startup_timeout=STARTUP,
        )
    )
    try:
        address = env.client.service_client.config.target_host
        path = f"{Path(installed_binary('temporal')).parent}{os.pathsep}{os.environ['PATH']}"
        setup = ["sh", str(SETUP_SCRIPT)]
        script_env = {**os.environ, "PATH": path, "TEMPORAL_ADDRESS": address}
        first = await asyncio.to_thread(processes.run, setup, env=script_env, timeout=60)
        # A second run changes nothing, and does not fail.
        again = await asyncio.to_thread(processes.run, setup, env=script_env, timeout=60)
        known = await env.client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace="default")
        )
    finally:
        await env.shutdown()
    assert first.returncode == 0, first.stdout + first.stderr
    assert again.returncode == 0, again.stdout + again.stderr
    assert {k.name for k in search_attributes.ALL} <= set(known.custom_attributes)
