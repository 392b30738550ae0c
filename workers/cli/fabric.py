"""`remedy controller`'s fabric test flags: which tests the active checks and admission run on
the node they hold, their deadline, and the images that carry the tools (the Kubernetes
provider's settings: adapters/kubernetes/provider.py)."""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer

from remedy.core.durations import parse_duration
from remedy.detection.fabric.verdict import FabricTest
from remedy.scan.fabric import FabricPolicy
from workers.cli.exits import BAD_INPUT

TestOption = Annotated[
    list[str] | None,
    typer.Option(
        "--fabric-test",
        help="A fabric test the active checks and admission run on the node they hold after "
        "its deep diagnose passed: nccl_loopback or nvbandwidth; ib_write_bw: pairs between "
        "the idle nodes an active-check round holds, with --fabric-port-rate (repeatable; "
        "none by default).",
    ),
]
DeadlineOption = Annotated[
    str,
    typer.Option(
        "--fabric-deadline",
        help="Each fabric test Job's activeDeadlineSeconds; past it the test fails.",
    ),
]
NcclImageOption = Annotated[
    str,
    typer.Option(
        "--fabric-nccl-tests-image", help="An image with nccl-tests' all_reduce_perf on its PATH."
    ),
]
NvbandwidthImageOption = Annotated[
    str,
    typer.Option("--fabric-nvbandwidth-image", help="An image with nvbandwidth on its PATH."),
]
PerftestImageOption = Annotated[
    str,
    typer.Option("--fabric-perftest-image", help="An image with perftest's ib_write_bw."),
]
PortRateOption = Annotated[
    float,
    typer.Option(
        "--fabric-port-rate",
        help="The RDMA port's rate in Gb/s (its sysfs rate): ib_write_bw pairs pass at 80 %.",
    ),
]
RdmaDeviceOption = Annotated[
    str, typer.Option("--fabric-rdma-device", help="The RDMA device ib_write_bw tests.")
]
NEEDS = {
    FabricTest.NCCL_LOOPBACK: "nccl_tests",
    FabricTest.NVBANDWIDTH: "nvbandwidth",
    FabricTest.IB_WRITE_BW: "perftest",
}


def fabric_policy(
    tests: list[str] | None, deadline: str, images: dict[str, str], port_rate: float = 0.0
) -> FabricPolicy:
    """The policy; a test with no image for its tool, or a bad name: one line, exit 1.
    ib_write_bw is the pair test (the active-check rounds' pairs), the others per node."""
    try:
        chosen = [FabricTest(t) for t in tests or []]
        pair = FabricTest.IB_WRITE_BW if FabricTest.IB_WRITE_BW in chosen else None
        policy = FabricPolicy(
            tests=[t for t in chosen if t is not pair],
            pair_test=pair,
            port_rate_gbps=port_rate,
            deadline=parse_duration(deadline),
        )
    except ValueError as exc:
        _fail("--fabric-test/--fabric-deadline/--fabric-port-rate", exc)
    for test in [*policy.tests, *([policy.pair_test] if policy.pair_test else [])]:
        if not images.get(NEEDS[test]):
            flag = f"--fabric-{NEEDS[test].replace('_', '-')}-image"
            _fail("--fabric-test", ValueError(f"{test.value} needs {flag}"))
    return policy


def _fail(option: str, exc: ValueError) -> NoReturn:
    typer.echo(f"error: {option}: {str(exc).splitlines()[0]}", err=True)
    raise typer.Exit(BAD_INPUT) from None
