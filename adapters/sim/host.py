"""The NodeHost seam for one simulated node: its probe, GPU reset, reboot and load test."""

from __future__ import annotations

from adapters.sim.faults import Effect
from adapters.sim.mig import destroy_instances, mig_manager_starts
from adapters.sim.nvml import SimNvml
from adapters.sim.state import SimState
from remedy.acting.capabilities import Dependency, DependencyCheck
from remedy.core.errors import ActionFailed
from remedy.core.models import Action
from remedy.core.once import once, reboot_once, unsure_not_repeated
from remedy.detection.gpu import NvmlApi
from remedy.detection.probe.load import LoadProblem, LoadReason, LoadReport
from remedy.detection.probe.nics import NicPort, PortCounters
from remedy.detection.probe.runner import ProbeConfig
from remedy.detection.probe.services import ServiceState
from remedy.detection.probe.throughput import compare_throughput, load_references

MODEL = (
    "NVIDIA H100 80GB HBM3"  # what NVML names an H100 SXM (tests/data/fabric/nvbandwidth_h100.txt)
)
# The sim's healthy GPU on the load test's 8192² bf16 matmul: 72 % of the H100 SXM's 989
# TFLOP/s datasheet figure (the reference file: "well over half").
HEALTHY_TFLOPS = 712.0
# A training step's share of dense matmul: a clock held low slows it, the memory-bound rest
# barely. A rank 20 % slower runs matmul 1 + 0.2 / 0.3 times as long: 60 % of its rate, under
# the reference's floor (SlowGpu); 5 % slower is 86 %, which the load test passes (unproven).
MATMUL_SHARE = 0.3


class SimHost:
    """The NodeHost seam for one simulated node."""

    def __init__(self, fleet: SimState, name: str) -> None:
        self._fleet = fleet
        self.name = name

    @property
    def probe_config(self) -> ProbeConfig:
        sim = self._fleet.node(self.name)
        return ProbeConfig(
            expected_gpus=self._fleet.gpus_per_node,
            check_timeout_s=self._fleet.check_timeout_s,
            nics=_SimNics(self),
            expected_nics=sim.nics,
            expected_nic_rate_gbps=400.0,
            nic_history=sim.nic_history,
            kernel_log=_SimKernelLog(self._fleet, self.name)
            if sim.kernel_log is not None
            else None,
            nvlink_window=sim.nvlink_window,
            fabric_manager=_SimFabricManager(self._fleet, self.name),
            dcgm_exporter=_SimDcgm(self._fleet, self.name) if sim.dcgm_exporter else None,
            dcgm_health=_SimDcgm(self._fleet, self.name) if sim.dcgm_health else None,
            exporter_readings=sim.exporter_readings,
        )

    def nic_ports(self) -> list[NicPort]:
        return self._fleet.node(self.name).nic_ports()

    def nic_counters(self) -> list[PortCounters]:
        return self._fleet.node(self.name).nic_counters()

    def nvml(self) -> NvmlApi:
        self._fleet.pause_point("probe")
        return SimNvml(self._fleet.node(self.name))

    def reset_gpus(self, indices: list[int], key: str) -> str:
        def reset() -> str:
            sim.clear(Action.RESET_GPU, targets)
            destroy_instances(sim, targets)
            self._fleet.record(self.name, "reset_gpu", key)
            return f"reset GPU {', '.join(map(str, indices)) or 'all'}"

        self._fleet.pause_point("reset_gpu")
        with self._fleet.lock:
            sim = self._fleet.act(self.name, "reset_gpu")
            targets = indices or [g.index for g in sim.gpus]
            lost = [g for g in targets if Effect.LOST in sim.effects(g)]
            if lost:
                raise ActionFailed(f"GPU {lost[0]} is lost from the bus: a reset cannot reach it")
            # Only the pods on the GPUs reset hold them (a pod whose GPU is unknown: any GPU);
            # a MIG instance in use holds its whole GPU: a reset needs every instance idle.
            held = [p for p in sim.pods if p.uses_gpus and (p.gpu is None or p.gpu in targets)]
            if held:
                mig = next((p for p in held if p.mig), None)
                raise ActionFailed(
                    f"MIG instance {mig.mig} of GPU {mig.gpu} is in use by {mig.name}: a reset "
                    "needs every instance idle"
                    if mig
                    else "processes still hold the GPU: drain or kill the job first"
                )
            # The machine's own book: the reset and its record land together.
            clock = self._fleet.clock
            done = once(sim, key, Action.RESET_GPU, clock, reset, unsure_not_repeated)
            return self._fleet.answer("reset_gpu", done)

    def reboot(self, key: str) -> str:
        def restart() -> str:
            self._fleet.record(self.name, "reboot", key)
            if not sim.comes_back:
                return "reboot issued; the node is not coming back"
            sim.clear(Action.REBOOT)
            sim.boot_id += 1
            destroy_instances(sim, [g.index for g in sim.gpus])
            mig_manager_starts(sim)  # as the node comes up
            sim.agent_starts()
            sim.pods = [p for p in sim.pods if p.daemonset]
            return "rebooted"

        self._fleet.pause_point("reboot")
        with self._fleet.lock:
            sim = self._fleet.act(self.name, "reboot")
            done = reboot_once(sim, key, sim.boot, self._fleet.clock, restart)
            return self._fleet.answer("reboot", done)

    def run_action(self, action: Action, command: list[str], key: str) -> str:
        """Clears what the fault table says ``action`` clears (``FaultSpec.fixed_by``)."""

        def run() -> str:
            sim.clear(action)
            self._fleet.record(self.name, action.value, key)
            return f"ran {' '.join(command)}"

        self._fleet.pause_point(action.value)
        with self._fleet.lock:
            sim = self._fleet.act(self.name, action.value)
            done = once(sim, key, action, self._fleet.clock, run, unsure_not_repeated)
            return self._fleet.answer(action.value, done)

    def load_test(self, indices: list[int]) -> LoadReport:
        with self._fleet.lock:
            sim = self._fleet.node(self.name)
            targets = indices or [g.index for g in sim.gpus]
            failing = {Effect.UNDER_LOAD, Effect.LOST, Effect.ECC, Effect.REMAP_FAILURE}
            problems = [
                LoadProblem(
                    gpu=g,
                    reason=LoadReason.FAILS_UNDER_LOAD,
                    evidence=f"GPU {g}: compute error under sustained load",
                )
                for g in targets
                if sim.effects(g) & failing
            ]
            now = self._fleet.clock()
            rates = {
                g: HEALTHY_TFLOPS / (1 + sim.slowdown(g, now, load_test=True) / MATMUL_SHARE)
                for g in targets
            }
            models = dict.fromkeys(targets, MODEL)
            problems += compare_throughput(rates, models, load_references())
            report = LoadReport(
                engine="sim", gpus=targets, problems=problems, throughput=rates, models=models
            )
            self._fleet.load_tests.append((self.name, now, report))
            return report

    def dependencies(self, refresh: bool = False) -> list[DependencyCheck]:
        with self._fleet.lock:
            missing = dict(self._fleet.node(self.name).missing)
        return [
            DependencyCheck.of(d, d not in missing, missing.get(d, "present (simulated)"))
            for d in Dependency
        ]


class _SimKernelLog:
    """The node's kernel log as the probe reads it: what was printed since the last read."""

    def __init__(self, fleet: SimState, node: str) -> None:
        self._fleet, self._node = fleet, node

    def read_new(self) -> list[str]:
        return self._fleet.read_kernel_log(self._node)


class _SimFabricManager:
    def __init__(self, fleet: SimState, node: str) -> None:
        self._fleet, self._node = fleet, node

    def state(self) -> ServiceState:
        with self._fleet.lock:
            return self._fleet.node(self._node).fabric_manager()


class _SimDcgm:
    """The node's DCGM as its agent asks it: the host engine's health watches (``check``) and
    dcgm-exporter's metrics (``fetch``)."""

    def __init__(self, fleet: SimState, node: str) -> None:
        self._fleet, self._node = fleet, node

    def check(self) -> str:
        with self._fleet.lock:
            return self._fleet.node(self._node).dcgm_health_report()

    def fetch(self) -> str:
        with self._fleet.lock:
            return self._fleet.node(self._node).exporter_metrics()


class _SimNics:
    def __init__(self, host: SimHost) -> None:
        self._host = host

    def ports(self) -> list[NicPort]:
        return self._host.nic_ports()

    def counters(self) -> list[PortCounters]:
        return self._host.nic_counters()
