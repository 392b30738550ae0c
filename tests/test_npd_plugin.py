"""remedy's probe as a node-problem-detector custom plugin: NPD's exit codes (0 OK, 1 NonOK,
2 Unknown) and one line within its default 80-byte output, and the shipped plugin config
invoking the real command."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from remedy.core.models import ProbeReport
from remedy.detection.npd import NPD_OUTPUT_LIMIT, npd_line
from tests.conftest import ROOT
from workers.cli import app

CONFIG = ROOT / "examples" / "npd" / "remedy-probe.json"


def _probe(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(app, ["probe", *args])
    return done.exit_code, done.output


def test_an_unhealthy_node_is_nonok_in_one_line_naming_the_fault() -> None:
    code, output = _probe("--simulate", "ecc_dbe", "--npd")
    assert code == 1, output
    assert output.count("\n") == 1 and len(output.rstrip("\n")) <= NPD_OUTPUT_LIMIT
    assert output.startswith("memory/EccUncorrectable"), output


def test_a_healthy_node_is_ok() -> None:
    code, output = _probe("--simulate", "none", "--npd")
    assert (code, output.split(":")[0]) == (0, "healthy"), output


def test_the_line_keeps_within_the_limit_and_counts_the_rest() -> None:
    _, raw = _probe("--simulate", "ecc_dbe", "--json")
    report = ProbeReport.model_validate_json(raw)
    many = report.model_copy(update={"findings": report.findings * 40})
    line = npd_line(many, limit=40)
    assert len(line) <= 40 and line.endswith(f"(+{len(many.findings) - 1} more)"), line
    nothing_ran = report.model_copy(update={"findings": [], "checks_run": []})
    assert npd_line(nothing_ran).startswith("could not probe")


def test_the_shipped_plugin_config_runs_the_probe_as_npd_reads_it() -> None:
    config = json.loads(CONFIG.read_text())
    assert config["plugin"] == "custom"
    assert config["pluginConfig"]["max_output_length"] == NPD_OUTPUT_LIMIT
    conditions = {c["type"] for c in config["conditions"]}
    for rule in config["rules"]:
        assert rule["condition"] in conditions and rule["path"].endswith("/remedy")
        command, *args = rule["args"]
        code, output = _probe(*args, "--simulate", "none") if command == "probe" else (-1, "")
        assert code == 0 and len(output.rstrip("\n")) <= NPD_OUTPUT_LIMIT, (rule, output)


def test_npd_and_json_together_are_refused_in_one_line() -> None:
    code, output = _probe("--simulate", "none", "--npd", "--json")
    assert code == 1 and output.startswith("error: --npd and --json"), output
