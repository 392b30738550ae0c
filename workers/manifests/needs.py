"""What each feature of the node agent needs from its pod, read from the agent's own flags: the
one table that renders the agent's DaemonSet (render.py) and checks one (check.py).

Why each need (docs/operations.md, "The agent's privileges", has the trade-offs):

- **Reboot through nsenter into pid 1** (``--allow-reboot`` with ``nsenter --target 1 ...``):
  pid 1 must be the host's (hostPID) and the caller root; ``/proc/1/ns/*`` opens only with
  CAP_SYS_PTRACE (pid 1 holds capabilities the agent does not), setns needs CAP_SYS_ADMIN and
  the mount namespace CAP_SYS_CHROOT as well (tests/test_manifests.py tries each one left out).
  The runtime's AppArmor profile lets a container read no process but its own: unconfined.
  CAP_SYS_BOOT: ``systemctl reboot`` asks logind, which reboots for a holder of it without
  asking polkit (which a node image may not have).
- **/dev/kmsg**: an unprivileged container's device cgroup refuses the device whatever is
  mounted, so privileged; root, for ``kernel.dmesg_restrict``.
- **The host's journal** (``journal:DIR``): journald's files are root's, mode 0640: root, no
  capability. The directory above DIR is mounted, read-only: it exists on every host, so the
  pod starts where the journal is not kept there and the agent says so (KernelLogUnreadable).
- **A log file** (``file:PATH``): kern.log is ``syslog:adm`` 0640: root with
  CAP_DAC_READ_SEARCH, its directory read-only.
- **GPU resets** (``--allow-reset``): ``nvidia-smi --gpu-reset`` wants root with
  CAP_SYS_ADMIN, every GPU's device and a writable /sys: privileged.
- **The state directory and the kernel-log cursor**: a hostPath the kubelet creates is root's,
  mode 0755: root, mounted writable.
- **NVML**: every GPU of the node, without taking one from the scheduler:
  ``NVIDIA_VISIBLE_DEVICES=all`` for the NVIDIA container runtime, no ``nvidia.com/gpu``.

A path in the agent's flags is a path on the host mounted at the same place, so that it means
the same in both."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from adapters.host.kernel_log import KernelLogTail
from adapters.host.kernel_sources import AutoSource, JournalSource, KmsgSource, kernel_log_source
from workers.flags import parse
from workers.flags.agent import AgentFlags

# What the agent runs to reboot its node from its container (docs/operations.md).
REBOOT_THROUGH_HOST = "nsenter --target 1 --mount --uts --ipc --net --pid -- systemctl reboot"
NSENTER_CAPABILITIES = frozenset({"SYS_ADMIN", "SYS_PTRACE", "SYS_CHROOT"})
VISIBLE_DEVICES = ("NVIDIA_VISIBLE_DEVICES", "all")


@dataclass(frozen=True)
class Mount:
    """A host path, mounted at the same path in the agent's container."""

    path: str
    writable: bool = False
    kind: str = "Directory"  # the hostPath type: what must be there before the pod starts

    def covers(self, path: str) -> bool:
        return PurePosixPath(path).is_relative_to(self.path)


@dataclass(frozen=True)
class Needs:
    """What one enabled feature needs; ``impossible`` says why no pod can give it that."""

    feature: str
    root: bool = False
    host_pid: bool = False
    privileged: bool = False
    capabilities: frozenset[str] = frozenset()
    unconfined: bool = False  # AppArmor
    mounts: tuple[Mount, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    impossible: str = ""


def agent_params(args: list[str]) -> dict[str, Any]:
    """The agent's options as its own command parses ``args`` (``["agent", ...]``, as a
    container runs it; the flags declared once, workers/flags/agent.py): a flag the agent lacks
    fails here, not on the fleet."""
    if args[:1] != ["agent"]:
        raise ValueError(f"not the agent's command line: {shlex.join(args[:3])} ...")
    return dict(parse(AgentFlags, args[1:], "agent"))


def agent_needs(params: Mapping[str, Any]) -> list[Needs]:
    """What the agent started with ``params`` needs from its pod, feature by feature."""
    state = str(params["state_dir"])
    needs = [
        Needs(
            f"the state directory {state} (--state-dir)",
            root=True,
            mounts=(Mount(state, writable=True, kind="DirectoryOrCreate"),),
        )
    ]
    if params["expected_gpus"] != 0:
        needs.append(Needs("NVML on every GPU of the node", env=(VISIBLE_DEVICES,)))
    kernel_log = kernel_log_needs(str(params["kernel_log"]))
    if kernel_log is not None:
        needs.append(kernel_log)
        if params["cursor"] is not None:
            cursor = str(PurePosixPath(params["cursor"]).parent)
            mount = Mount(cursor, writable=True, kind="DirectoryOrCreate")
            needs.append(Needs("the kernel-log cursor (--cursor)", root=True, mounts=(mount,)))
    if params["kubernetes"] and params["pod_resources"]:
        mount = Mount(str(PurePosixPath(params["pod_resources"]).parent), kind="Directory")
        needs.append(
            Needs("which pod uses which GPU (--pod-resources)", root=True, mounts=(mount,))
        )
    if params["allow_reset"]:
        needs.append(Needs("GPU resets (--allow-reset)", root=True, privileged=True))
    if params["allow_reboot"]:
        needs.append(reboot_needs(str(params["reboot_command"])))
    return needs


def kernel_log_needs(spec: str) -> Needs | None:
    feature = f"the kernel log (--kernel-log {spec})"
    source = kernel_log_source(spec)  # the agent's own reading of the option
    if source is None:
        return None
    if isinstance(source, AutoSource):
        why = "auto reads whatever the node lets it, so no pod grants exactly what it needs"
        return Needs(feature, impossible=f"{why}: name the source (journal:DIR, kmsg, file:PATH)")
    if isinstance(source, KmsgSource):
        mount = Mount(str(source.path), kind="CharDevice")
        return Needs(feature, root=True, privileged=True, mounts=(mount,))
    if isinstance(source, JournalSource):
        if source.directory is None:
            why = "journalctl reads the container's own journal, which has none"
            return Needs(feature, impossible=f"{why}: name the host's (journal:/var/log/journal)")
        return Needs(feature, root=True, mounts=(_parent(source.directory),))
    if isinstance(source, KernelLogTail):
        return Needs(
            feature,
            root=True,
            capabilities=frozenset({"DAC_READ_SEARCH"}),
            mounts=(_parent(source.path),),
        )
    return Needs(feature, impossible=f"remedy cannot tell what {source} needs")


def reboot_needs(command: str) -> Needs:
    feature = f"reboots (--allow-reboot, --reboot-command {command!r})"
    words = shlex.split(command)
    program = PurePosixPath(words[0]).name if words else ""
    if program == "nsenter" and _targets_pid_1(words):
        return Needs(
            feature,
            root=True,
            host_pid=True,
            capabilities=NSENTER_CAPABILITIES | {"SYS_BOOT"},
            unconfined=True,
        )
    if program == "systemctl":
        why = "systemctl in the agent's container reaches no systemd of the host"
        return Needs(feature, impossible=f"{why}: use {REBOOT_THROUGH_HOST!r}")
    return Needs(feature, impossible=f"remedy cannot tell what {program or 'it'} needs")


def _targets_pid_1(words: list[str]) -> bool:
    enter = words[: words.index("--")] if "--" in words else words
    pairs = zip(enter, enter[1:], strict=False)
    return "--target=1" in enter or any(a in ("-t", "--target") and b == "1" for a, b in pairs)


def _parent(path: object) -> Mount:
    return Mount(str(PurePosixPath(str(path)).parent))
