"""Redaction rules: each default kind hidden with its marker, ordinary GPU, NCCL and kernel text
left alone, an operator's patterns file (added, disabled, replaced, refused with FILE:LINE:
FIELD), bounds on the work, and the boundaries that apply it (a node's probe, the agent)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.node import NodeActivities
from adapters.sim import SimFleet
from adapters.sim.host import SimHost
from adapters.sim.jobs import CUDA_ERROR, NCCL_TIMEOUT
from remedy.attribution.evidence import GuardedFailure
from remedy.attribution.guard import JobRef
from remedy.attribution.model import PodFailure, Termination
from remedy.core.models import NodeRef, ProbeRequest
from remedy.detection.probe.runner import ProbeConfig
from remedy.redaction import (
    DEFAULT_RULES,
    RedactionError,
    Redactor,
    Rule,
    load_redactor,
    redacted,
)
from remedy.redaction.rules import MAX_TEXT
from remedy.runbook import RunbookSet
from tests.conftest import ROOT
from tests.test_cli import cli
from workers.agent import AgentConfig, NodeAgent

DATA = ROOT / "tests" / "data"
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"

# Each default kind: the text, the secret it holds, what must remain readable.
KINDS = [
    ("authorization", f"Authorization: Bearer {JWT}", JWT, "Authorization: Bearer "),
    ("authorization", "authorization=Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy", "Basic "),
    ("jwt", f"session {JWT} expired", JWT, "session "),
    ("aws-access-key", "key AKIAIOSFODNN7EXAMPLE used", "AKIAIOSFODNN7EXAMPLE", "used"),
    (
        "aws-secret-key",
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG",
        "AWS_SECRET_ACCESS_KEY=",
    ),
    ("github-token", "ghp_" + "a" * 36, "ghp_aaaa", ""),
    ("github-token", "github_pat_" + "B" * 30, "github_pat_BBB", ""),
    ("slack-token", "xoxb-1234567890-abcdefABCDEF", "xoxb-1234567890", ""),
    ("api-key", "OPENAI sk-proj-" + "Z9" * 12, "sk-proj-Z9Z9", "OPENAI"),
    ("api-key", "stripe sk_live_" + "4eC39HqLyjWDarjt", "sk_live_4eC", "stripe"),
    ("secret", "db password=hunter2 port=5432", "hunter2", "password=[REDACTED:secret] port"),
    ("secret", "HF_TOKEN='hf abc' next", "hf abc", "HF_TOKEN='[REDACTED:secret]' next"),
    ("secret", '{"api_key": "k\\"ey-1", "n": 3}', 'k\\"ey-1', '{"api_key": "[REDACTED:secret]"'),
    ("secret", "client_secret = s3cr3t&x=1", "s3cr3t", "&x=1"),
    ("email", "contact bob.smith+ml@corp.example.co.uk now", "bob.smith", "contact "),
    (
        "private-key",
        "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
        "-----END OPENSSH PRIVATE KEY-----\nafter",
        "b3BlbnNzaC1rZXktdjEAAAAA",
        "\nafter",
    ),
    ("private-key", "tail cut\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg", "MIIEvQ", "tail cut"),
    (
        "private-key",
        "MIIEvQIBADANBgkqhkiG9w0BAQEF\nAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----\nok",
        "AoIBAQC7VJTUt9Us8cKj",
        "\nok",
    ),
]


@pytest.mark.parametrize(("kind", "text", "secret", "kept"), KINDS)
def test_each_default_kind_is_hidden_behind_its_marker(
    kind: str, text: str, secret: str, kept: str
) -> None:
    out = Redactor().text(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out
    assert kept in out
    assert Redactor().text(out) == out  # a marker is never redacted again


def ordinary_lines() -> list[str]:
    """Kernel logs (real NVRM lines), DCGM's output, the simulated ranks' last words, and
    training-log lines with words close to the keys."""
    lines = [
        line
        for name in ("kernel.log", "kmsg.txt", "journal-k.txt")
        for line in (DATA / name).read_text().splitlines()
    ]
    for report in sorted((DATA / "dcgm").glob("*.json")):
        lines.append(json.dumps(json.loads(report.read_text())))
    return [
        *lines,
        CUDA_ERROR,
        NCCL_TIMEOUT.format(rank=3),
        "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.7<0>",
        "NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory",
        "Started user@1000.service - User Manager for UID 1000.",
        "Started getty@tty1.service and serial-getty@ttyS0.service",
        "step 1200: loss=2.31 max_tokens=2048 tokenizer=llama3 lr=3e-4 grad_norm=0.91",
        "failed to read secret: not found; token expired, please re-authenticate",
        "pip install torch==2.4.0 (from git+https://github.com/pytorch/pytorch@v2.4.0)",
        "GPU-2b8b6c2e-0000-4c1a-9a7e-1234567890ab SN1652020000001 PCI:0000:5a:00.0",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ]


def test_ordinary_gpu_nccl_and_kernel_text_is_left_alone() -> None:
    redactor = Redactor()
    changed = [line for line in ordinary_lines() if redactor.text(line) != line]
    assert changed == []


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "redact.yaml"
    path.write_text(text)
    return path


def test_an_operators_patterns_add_replace_and_disable_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "disable: [email, url-password]\n"  # the db-url pattern stands in for the default
        "patterns:\n"
        "  - name: customer-id\n"
        "    pattern: 'CUST-[0-9]{8}'\n"
        "  - name: db-url\n"
        "    pattern: 'postgres://[^:/]+:(?P<secret>[^@/]+)@[a-z.]+'\n"
        "    keep: '@localhost$'\n"
        "  - name: jwt\n"  # replaces the default jwt rule
        "    pattern: 'eyJ[A-Za-z0-9_.-]+'\n",
    )
    redactor = load_redactor(path)
    out = redactor.text(
        "CUST-12345678 postgres://app:pw1@db.internal/x postgres://app:pw2@localhost/x "
        "a@example.com eyJhbGci.x"
    )
    assert out == (
        "[REDACTED:customer-id] postgres://app:[REDACTED:db-url]@db.internal/x "
        "postgres://app:pw2@localhost/x a@example.com [REDACTED:jwt]"
    )
    assert [r.name for r in redactor.rules][-3:] == ["customer-id", "db-url", "jwt"]
    assert load_redactor(write(tmp_path, "defaults: false\n")).text("a@example.com") == (
        "a@example.com"
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "patterns:\n  - name: x\n    pattern: 'a(b'\n",
            "redact.yaml:3: patterns.0.pattern: invalid regular expression 'a(b': missing )",
        ),
        (
            "patterns:\n  - name: x\n    pattern: '(a)\\1'\n",
            "redact.yaml:3: patterns.0.pattern: invalid regular expression",
        ),
        (
            "patterns:\n  - name: ok\n    pattern: b\n  - name: x\n    pattern: 'a*'\n",
            "redact.yaml:5: patterns.1.pattern: 'a*' matches the empty string",
        ),
        ("disable: [emails]\n", "redact.yaml:1: disable: no default rule emails (they are: "),
        ("patterns:\n  - name: Bad Name\n    pattern: x\n", "redact.yaml:2: patterns.0.name:"),
        ("patterns:\n  - pattern: x\n    nmae: y\n", "redact.yaml:3: patterns.0.nmae: Extra"),
        (
            "patterns:\n  - {name: a, pattern: x}\n  - {name: a, pattern: y}\n",
            "redact.yaml:1: patterns: pattern names used twice: a",
        ),
        ("patterns: [\n", "redact.yaml:2: invalid YAML"),
    ],
)
def test_a_broken_patterns_file_names_file_line_and_field(
    tmp_path: Path, text: str, error: str
) -> None:
    with pytest.raises(RedactionError) as raised:
        load_redactor(write(tmp_path, text))
    assert error in str(raised.value)


def test_the_work_is_bounded() -> None:
    # RE2 has no backtracking: the classic catastrophic pattern is linear here.
    redactor = Redactor(rules=(*DEFAULT_RULES, Rule(name="nested", pattern="(a+)+$")))
    assert redactor.text("a" * 50_000 + "b").endswith("b")
    long = "x" * (MAX_TEXT + 10)
    assert redactor.text(long).endswith("[cut: 10 more characters]")


def test_redacted_walks_a_message_and_keeps_what_is_clean() -> None:
    clean = PodFailure(
        job="ml/llm",
        pod="llm-0",
        node="n1",
        failed_at="2026-11-30T00:00:00Z",  # type: ignore[arg-type]
        termination=Termination(exit_code=1, message="OOM"),
        log_tail="loss 1.9",
    )
    redactor = Redactor()
    assert redacted(clean, redactor) is clean
    dirty = GuardedFailure(
        job=JobRef(namespace="ml", name="llm"),
        pod_uid="u",
        failure=clean.model_copy(
            update={
                "log_tail": "mail ops@example.com",
                "termination": Termination(message="password=x1"),
            }
        ),
    )
    out = redacted(dirty, redactor)
    assert out.failure.log_tail == "mail [REDACTED:email]"
    assert out.failure.termination.message == "password=[REDACTED:secret]"
    assert out.pod_uid == "u" and out.failure.pod == "llm-0"  # names are no free text


# An Xid naming a process whose command line holds a key: the kernel prints it as is.
XID_LINE = (
    "NVRM: Xid (PCI:0000:38:00): 13, pid=4242, name=python3 train.py "
    "--api_key=abcd1234secret, Graphics SM Warp Exception on (GPC 0, TPC 1)"
)


class KernelLines:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def read_new(self) -> list[str]:
        lines, self.lines = self.lines, []
        return lines


class LoggingHost(SimHost):
    """A simulated node whose kernel log says ``XID_LINE`` once."""

    def __init__(self, fleet: SimFleet, name: str) -> None:
        super().__init__(fleet, name)
        self.source = KernelLines([XID_LINE])

    @property
    def probe_config(self) -> ProbeConfig:
        return replace(super().probe_config, kernel_log=self.source)


def test_a_nodes_probe_returns_its_kernel_lines_redacted() -> None:
    fleet = SimFleet(nodes=1)
    host = LoggingHost(fleet, sorted(fleet.nodes)[0])
    probe = NodeActivities(lambda _: host).probe
    report = probe(ProbeRequest(node=NodeRef(name=host.name)))
    [xid] = [f for f in report.findings if f.xid == 13]
    assert "abcd1234secret" not in xid.evidence + (xid.process or "")
    assert "[REDACTED:secret]" in xid.evidence and "[REDACTED:secret]" in (xid.process or "")


async def test_the_agent_keeps_and_reports_its_probe_redacted(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=1)
    host = LoggingHost(fleet, sorted(fleet.nodes)[0])
    config = AgentConfig(node=NodeRef(name=host.name))
    agent = NodeAgent(time_env.client, host, RunbookSet([]), None, config)
    report = await agent.tick([])
    assert report is agent.last_report
    assert "abcd1234secret" not in report.model_dump_json()
    assert "[REDACTED:secret]" in report.model_dump_json()


@pytest.mark.parametrize("command", [["controller"], ["agent", "--node", "n1"]])
async def test_a_broken_patterns_file_stops_the_process_at_start(
    tmp_path: Path, command: list[str]
) -> None:
    bad = write(tmp_path, "patterns:\n  - name: x\n    pattern: '(?<=a)b'\n")
    code, output = await cli(*command, "--redact-patterns", str(bad))
    assert code == 1
    assert output.startswith(f"{bad}:3: patterns.0.pattern: invalid regular expression")
