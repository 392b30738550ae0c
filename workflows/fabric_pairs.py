"""Pair tests in an active-check round: ib_write_bw between the idle nodes the round checks at
once. Each of those nodes is held by its own ActiveCheck (cordoned, no GPU pod, within the
pool's idle cap); a check whose diagnose passed tells the round (PAIR_READY) and waits, still
cordoned. Once every check is ready or done, the round pairs the healthy ones, re-pairs the
undecided (remedy/scan/pairs.py), at most PAIR_ROUNDS tests each, and answers each waiting
check with its findings (PAIR_VERDICT): the slow member fails its check and goes to its ladder,
the others are uncordoned by their check. A pair Job past its deadline is a failed pair (fail
closed, workflows/fabric_test.py). Never a busy node: nodes taken out under the budget are not
paired, nor a node whose check was skipped or deferred.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio import workflow

from contract.messages import PAIR_VERDICT
from workflows.fabric_test import fabric_test

with workflow.unsafe.imports_passed_through():
    from contract.names import active_check_workflow_id
    from remedy.detection.fabric.verdict import FabricVerdict
    from remedy.scan.active_checks import ActiveCheckPolicy
    from remedy.scan.fabric import PAIR_ROUNDS, FabricPolicy, FabricRun, PairVerdict
    from remedy.scan.pairs import Pair, blame, next_round, pair_findings


class PairRound:
    """The round's side: which checks are ready, the pair tests, the answers."""

    def __init__(self) -> None:
        self.ready: dict[str, bool] = {}  # node -> its diagnose passed

    async def run(
        self, policy: ActiveCheckPolicy, nodes: list[str], done: Callable[[str], bool]
    ) -> str:
        """The pair tests between ``nodes`` (``done``: whether a node's check has ended);
        answers a line for the round's summary."""
        fabric = policy.fabric
        try:
            await workflow.wait_condition(
                lambda: all(n in self.ready or done(n) for n in nodes),
                timeout=fabric.ready_wait(policy.diagnose_timeout),
                timeout_summary="the checks' diagnoses, before the pair tests",
            )
        except TimeoutError:
            workflow.logger.warning("pair tests: some checks not ready in time, left out")
        healthy = sorted(n for n in nodes if self.ready.get(n) and not done(n))
        verdicts = await _test(fabric, healthy) if len(healthy) >= 2 else {}
        findings = pair_findings(healthy, verdicts, workflow.now())
        for node in healthy:
            try:
                await PAIR_VERDICT.send_to(
                    active_check_workflow_id(node), PairVerdict(findings=findings.get(node, []))
                )
            except Exception:  # noqa: BLE001 - a check that ended waits for nothing
                workflow.logger.warning("could not give %s its pair verdict", node)
        return _line(healthy, verdicts)


async def _test(policy: FabricPolicy, nodes: list[str]) -> dict[Pair, FabricVerdict]:
    """Rounds of pairs run at once, each round's Jobs named apart, until all is decided or
    PAIR_ROUNDS have run."""
    assert policy.pair_test is not None
    run_id = workflow.info().run_id.replace("-", "")[:12]
    verdicts: dict[Pair, FabricVerdict] = {}
    for n in range(PAIR_ROUNDS):
        pairs = next_round(nodes, {pair: v.passed for pair, v in verdicts.items()})
        if not pairs:
            break
        runs = [
            FabricRun(
                run_id=f"{run_id}-p{n}-{i}",
                test=policy.pair_test,
                nodes=list(pair),
                deadline=policy.deadline,
                port_rate_gbps=policy.port_rate_gbps,
            )
            for i, pair in enumerate(pairs)
        ]
        got = await asyncio.gather(*(fabric_test(run, policy.poll) for run in runs))
        verdicts.update(zip(pairs, got, strict=True))
    return verdicts


def _line(nodes: list[str], verdicts: dict[Pair, FabricVerdict]) -> str:
    if not verdicts:
        return f"pair tests: not run ({len(nodes)} node(s) ready, 2 needed)"
    found = blame({pair: v.passed for pair, v in verdicts.items()})
    count = len(verdicts)
    parts = [f"{count} pair{'s' if count > 1 else ''} among {len(nodes)} nodes"]
    parts += [f"slow: {', '.join(found.slow)}"] if found.slow else []
    parts += [f"undecided: {', '.join(found.undecided)}"] if found.undecided else []
    parts += [f"slow path: {a}-{b}" for a, b in found.paths]
    return "pair tests: " + "; ".join(parts)
