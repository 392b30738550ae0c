"""The breaker alert, end to end: the demo (a fault every half second, runbook time not sped up,
so its breaker trips within seconds and stays tripped for the storm window's ten minutes)
serves its metrics; the real Prometheus server (`make tools`) scrapes them every second and
evaluates the shipped rules file as is, and raises RemedyBreakerTripped once its ``for:`` (a
minute) has passed; the dashboard's queries answer there. docs/operations.md ("Alerts end to
end") gives the same by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.processes import Children, free_port
from tests.prometheus import ROOT, RULES, VARIABLES, binary, dashboard_queries

PATIENCE_S = 240  # the demo's start, its trip, the alert's minute: a bound, not a timing


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _firing(prometheus: str) -> list[dict[str, Any]]:
    try:
        alerts = _get(f"{prometheus}/api/v1/alerts")["data"]["alerts"]
    except OSError:  # not listening yet
        return []
    return [a for a in alerts if a["state"] == "firing"]


def test_a_real_prometheus_fires_the_breaker_alert_while_the_demos_breaker_is_tripped(
    tmp_path: Path, processes: Children
) -> None:
    metrics_port, web_port = free_port(), free_port()
    demo_log = tmp_path / "demo.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with demo_log.open("w") as out:
        demo = processes.start(
            [
                sys.executable,
                "-m",
                "workers",
                "demo",
                "--nodes",
                "8",
                "--fault-every",
                "0.5",
                "--speedup",
                "1",
                "--slow-node",
                "0",
                "--metrics-bind",
                f"127.0.0.1:{metrics_port}",
                "--port",
                str(free_port()),
                "--ui-port",
                str(free_port()),
                "--db",
                str(tmp_path / "demo.sqlite"),
            ],  # fmt: skip
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
        )
    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(RULES)],
                "scrape_configs": [
                    {
                        "job_name": "remedy-demo",
                        "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
                    }
                ],
            }
        )
    )
    prometheus_log = tmp_path / "prometheus.log"
    with prometheus_log.open("w") as out:
        processes.start(
            [
                binary("prometheus"),
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{web_port}",
            ],
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
        )
    prometheus = f"http://127.0.0.1:{web_port}"
    deadline = time.monotonic() + PATIENCE_S
    firing: list[dict[str, Any]] = []
    while time.monotonic() < deadline and demo.poll() is None:
        firing = _firing(prometheus)
        if any(a["labels"]["alertname"] == "RemedyBreakerTripped" for a in firing):
            break
        time.sleep(1)
    else:
        raise AssertionError(_what_it_shows(prometheus, demo_log, prometheus_log))
    breaker = next(a for a in firing if a["labels"]["alertname"] == "RemedyBreakerTripped")
    assert breaker["labels"]["pool"] == "default"
    assert breaker["labels"]["severity"] == "critical"
    assert breaker["annotations"]["runbook_url"].endswith("#alert-remedybreakertripped")
    assert "remedy resume-pool default" in breaker["annotations"]["description"]
    # The dashboard's queries, on the same Prometheus: each answers, and the demo's fleet,
    # ladders and breaker show in theirs.
    answered = {q: _query(prometheus, q) for q in dashboard_queries()}
    assert [q for q, result in answered.items() if result is None] == []
    for shown in ("remedy_fleet_nodes", "remedy_ladders{", "remedy_storm_breaker_tripped"):
        assert any(shown in q and result for q, result in answered.items()), shown


def _query(prometheus: str, query: str) -> list[Any] | None:
    """The query's result as Grafana would run it (None: Prometheus refused it)."""
    for variable, value in VARIABLES.items():
        query = query.replace(variable, value)
    url = f"{prometheus}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
    try:
        answer = _get(url)
    except urllib.error.HTTPError:
        return None
    return list(answer["data"]["result"]) if answer["status"] == "success" else None


def _what_it_shows(prometheus: str, demo_log: Path, prometheus_log: Path) -> str:
    try:
        alerts = json.dumps(_get(f"{prometheus}/api/v1/alerts")["data"], indent=1)
        targets = json.dumps(_get(f"{prometheus}/api/v1/targets")["data"], indent=1)
        tripped = json.dumps(
            _get(f"{prometheus}/api/v1/query?query=remedy_storm_breaker_tripped")["data"]
        )
    except OSError as err:
        alerts = targets = tripped = f"Prometheus did not answer: {err}"
    return (
        f"no RemedyBreakerTripped firing within {PATIENCE_S} s\nalerts: {alerts}\n"
        f"targets: {targets}\nremedy_storm_breaker_tripped: {tripped}\n"
        f"demo: {demo_log.read_text()[-3000:]}\nprometheus: {prometheus_log.read_text()[-2000:]}"
    )
