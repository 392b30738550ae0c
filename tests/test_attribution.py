"""Platform or application? A table of realistic failures of a training job's pod, each with
the verdict, the rule and the evidence the shipped rules must give."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from remedy.attribution.guard import Decision, Failure, GuardAction, GuardPolicy, JobLedger
from remedy.attribution.model import (
    Attribution,
    PodFailure,
    RemediationSeen,
    Termination,
    Verdict,
    XidSeen,
)
from remedy.attribution.rules import Attributor, RulesError, load_rules
from remedy.core.models import Component, ComponentKind, Finding, Severity

AT = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)
JOB = "llm-pretrain"
NODE, OTHER = "gpu-node-017", "gpu-node-042"
TRACEBACK = 'Traceback (most recent call last):\n  File "train.py", line 88\nValueError: bad shape'
NCCL = (
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=91, "
    "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n" + TRACEBACK
)


def xid(
    code: int, gpu: str = "SN-A", node: str = NODE, job: str | None = JOB, minutes: float = -1
) -> XidSeen:
    return XidSeen(
        code=code,
        gpu=gpu,
        node=node,
        at=AT + timedelta(minutes=minutes),
        pid=4242,
        process="python",
        job=job,
    )


def finding(check: str, reason: str, node: str = OTHER) -> Finding:
    return Finding(
        node=node,
        check=check,
        reason=reason,
        severity=Severity.CRITICAL,
        component=Component(kind=ComponentKind.NIC, device="mlx5_3/1"),
        observed_at=AT - timedelta(minutes=2),
    )


def ladder(runbook: str, cause: str = "platform", node: str = NODE) -> RemediationSeen:
    return RemediationSeen(
        node=node, runbook=runbook, cause=cause, started_at=AT - timedelta(minutes=3)
    )


def failure(exit_code: int | None = 1, reason: str = "Error", **more: Any) -> PodFailure:
    disruption = more.pop("disruption", None)
    return PodFailure(
        job=JOB,
        pod=f"{JOB}-worker-3",
        node=NODE,
        failed_at=AT,
        termination=Termination(exit_code=exit_code, reason=reason, disruption=disruption),
        **more,
    )


CASES = [
    (
        "hardware Xid during the run",
        failure(xids=[xid(79)]),
        Verdict.PLATFORM,
        "hardware-xid-during-run",
        "Xid 79",
    ),
    (
        "node lost",
        failure(exit_code=None, reason="", node_gone=True),
        Verdict.PLATFORM,
        "node-lost",
        f"node {NODE} no longer exists",
    ),
    (
        "evicted by remedy's drain",
        failure(
            exit_code=143,
            reason="Error",
            disruption="EvictionByEvictionAPI",
            remediations=[ladder("gpu-memory-ecc")],
        ),
        Verdict.PLATFORM,
        "evicted-by-remedy",
        "remedy was remediating gpu-node-017",
    ),
    (
        "evicted by someone else's drain",
        failure(exit_code=143, disruption="EvictionByEvictionAPI"),
        Verdict.PLATFORM,
        "disrupted-by-cluster",
        "EvictionByEvictionAPI",
    ),
    (
        "preempted by the scheduler",
        failure(exit_code=143, disruption="PreemptionByScheduler"),
        Verdict.PLATFORM,
        "disrupted-by-cluster",
        "PreemptionByScheduler",
    ),
    (
        "OOMKilled",
        failure(exit_code=137, reason="OOMKilled"),
        Verdict.APPLICATION,
        "out-of-memory",
        "OOMKilled",
    ),
    (
        "Python exception",
        failure(log_tail=TRACEBACK),
        Verdict.APPLICATION,
        "python-exception",
        "Traceback",
    ),
    (
        "CUDA out of memory",
        failure(log_tail="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.0 GiB"),
        Verdict.APPLICATION,
        "cuda-out-of-memory",
        "CUDA out of memory",
    ),
    (
        "NCCL timeout with a NIC finding on one node",
        failure(log_tail=NCCL, findings=[finding("nic", "NicPortDown")]),
        Verdict.PLATFORM,
        "nccl-timeout-with-a-fault-on-the-job",
        f"nic finding on {OTHER}",
    ),
    (
        "NCCL timeout, a GPU fell off the bus on another node",
        failure(log_tail=NCCL, xids=[xid(79, node=OTHER, job=None)]),
        Verdict.PLATFORM,
        "nccl-timeout-with-a-fault-on-the-job",
        f"Xid 79 on GPU SN-A of {OTHER}",
    ),
    (
        "NCCL timeout while another rank raised its own Xid 13",
        failure(
            log_tail=NCCL,
            xids=[xid(13, node=OTHER)],
            findings=[
                Finding(
                    node=OTHER,
                    check="xid",
                    reason="Xid13",
                    xid=13,
                    severity=Severity.WARNING,
                    observed_at=AT,
                )
            ],
        ),
        Verdict.UNKNOWN,
        "nccl-timeout-unexplained",
        "no finding, hardware Xid or platform ladder",
    ),
    (
        "NCCL timeout with no finding anywhere",
        failure(log_tail=NCCL),
        Verdict.UNKNOWN,
        "nccl-timeout-unexplained",
        "no finding, hardware Xid or platform ladder",
    ),
    (
        "Xid 13 on one GPU three times, under three jobs",
        failure(
            xids=[xid(13)],
            xid_history=[xid(13, job="eval-7", minutes=-3000), xid(13, job="sft-2", minutes=-9000)],
        ),
        Verdict.PLATFORM,
        "app-xid-same-gpu-across-jobs",
        "GPU SN-A raised application Xids under 3 different jobs",
    ),
    (
        "Xid 13 on three different GPUs",
        failure(xids=[xid(13, gpu="SN-A"), xid(13, gpu="SN-B"), xid(13, gpu="SN-C")]),
        Verdict.APPLICATION,
        "app-xid-on-several-gpus",
        "3 different GPUs",
    ),
    (
        "Xid 31 once, on a GPU with no history",
        failure(xids=[xid(31)]),
        Verdict.APPLICATION,
        "app-xid-once",
        "Xid 31 raised by the job's own process python",
    ),
    (
        "Xid 13 while remedy runs the application runbook on the node",
        failure(xids=[xid(13)], remediations=[ladder("application-xid", cause="application")]),
        Verdict.APPLICATION,
        "app-xid-once",
        "Xid 13",
    ),
    (
        "uncorrectable ECC reported by CUDA, no Xid on record",
        failure(log_tail="RuntimeError: CUDA error: uncorrectable ECC error encountered"),
        Verdict.PLATFORM,
        "hardware-error-in-log",
        "uncorrectable ECC error",
    ),
    (
        "a platform ladder was running on the node",
        failure(remediations=[ladder("thermal")]),
        Verdict.PLATFORM,
        "platform-ladder-on-node",
        "thermal, platform cause",
    ),
    (
        "killed by a signal, no eviction or OOM on record",
        failure(exit_code=137),
        Verdict.UNKNOWN,
        "killed-by-signal",
        "exit code 137",
    ),
    (
        "image pull failure",
        failure(exit_code=None, reason="ErrImagePull"),
        Verdict.APPLICATION,
        "bad-configuration",
        "ErrImagePull",
    ),
    (
        "exit 1 and nothing else known",
        failure(),
        Verdict.UNKNOWN,
        "no-rule-matched",
        "no rule matched",
    ),
    (
        "an old hardware Xid, long before the failure",
        failure(xids=[xid(48, minutes=-120)], log_tail=TRACEBACK),
        Verdict.APPLICATION,
        "python-exception",
        "Traceback",
    ),
]


@pytest.mark.parametrize(
    ("failed", "verdict", "rule", "evidence"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_attribution(failed: PodFailure, verdict: Verdict, rule: str, evidence: str) -> None:
    got = Attributor().attribute(failed)
    assert (got.verdict, got.rule) == (verdict, rule), got.evidence
    assert any(evidence in line for line in got.evidence), got.evidence


def test_the_table_covers_the_cases_the_issue_names() -> None:
    assert len(CASES) >= 15
    assert {c[2] for c in CASES} == set(Verdict)


def test_rules_are_data_an_operator_can_replace(tmp_path: Path) -> None:
    own = tmp_path / "rules.yaml"
    own.write_text(
        "window: 1m\nrules:\n  - name: everything-is-the-code\n"
        "    verdict: application\n    when: {exit_codes: [1]}\n"
    )
    got = Attributor(load_rules(own)).attribute(failure(xids=[xid(79)]))
    assert (got.verdict, got.rule) == (Verdict.APPLICATION, "everything-is-the-code")
    own.write_text("rules:\n  - name: typo\n    verdict: platform\n    when: {exitcodes: [1]}\n")
    with pytest.raises(RulesError, match=r"rules\.yaml:4: rules\.0\.when\.exitcodes: Extra "):
        load_rules(own)
    own.write_text(
        "rules:\n  - name: x\n    verdict: application\n    blame_node: true\n"
        "    when: {exit_codes: [1]}\n"
    )  # only a platform fault blames the node
    with pytest.raises(RulesError, match=r"rules\.yaml:2: rules\.0: blame_node: only a platform"):
        load_rules(own)


def _attributed(verdict: Verdict) -> Attribution:
    return Attribution(verdict=verdict, rule=f"some-{verdict.value}-rule", evidence=["x"])


def _run(ledger: JobLedger, verdicts: list[Verdict], policy: GuardPolicy) -> list[Decision]:
    decisions = []
    for i, verdict in enumerate(verdicts):
        decision = ledger.decide(_attributed(verdict), policy)
        ledger.record(
            Failure(
                at=AT + timedelta(hours=i),
                pod=f"p{i}",
                attribution=_attributed(verdict),
                lost=timedelta(minutes=10),
                decision=decision,
            )
        )
        decisions.append(decision)
    return decisions


def test_platform_failures_restart_with_backoff_until_the_cap() -> None:
    policy = GuardPolicy(
        max_platform_restarts=3,
        backoff_initial=timedelta(minutes=1),
        backoff_max=timedelta(minutes=3),
    )
    ledger = JobLedger(job=JOB)
    got = _run(ledger, [Verdict.PLATFORM] * 4, policy)
    assert [d.action for d in got] == [GuardAction.RESTART] * 3 + [GuardAction.HOLD]
    assert [d.delay for d in got[:3]] == [timedelta(minutes=m) for m in (1, 2, 3)]  # capped
    assert ledger.lost(Verdict.PLATFORM) == timedelta(minutes=40)


def test_an_application_failure_stops_and_unknown_gets_one_retry() -> None:
    ledger = JobLedger(job=JOB)
    unknown = _run(ledger, [Verdict.UNKNOWN, Verdict.UNKNOWN], GuardPolicy())
    stop = ledger.decide(_attributed(Verdict.APPLICATION), GuardPolicy())
    assert [d.action for d in unknown] == [GuardAction.RESTART, GuardAction.HOLD]
    assert stop.action is GuardAction.STOP and "fail the same way" in stop.reason
    assert ledger.lost(Verdict.UNKNOWN) == timedelta(minutes=20)
    assert ledger.lost(Verdict.APPLICATION) == timedelta(0)
