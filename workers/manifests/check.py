"""Does the agent's DaemonSet give each feature its flags enable what it needs (needs.py), and
nothing more? Each problem is a sentence naming the feature and the field.

Three kinds: a need no field grants (the feature would fail on every node), a grant no enabled
feature needs (a privilege for nothing), and a combination the API server or the kubelet
refuses (``allowPrivilegeEscalation: false`` with privileged or CAP_SYS_ADMIN; runAsNonRoot
with runAsUser 0). ``privileged`` holds every capability, device and AppArmor exemption."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from workers.manifests.needs import Mount, Needs, agent_needs, agent_params

Json = dict[str, Any]
_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass(frozen=True)
class Granted:
    """What a pod spec gives one of its containers."""

    root: bool
    host_pid: bool
    privileged: bool
    capabilities: frozenset[str]
    unconfined: bool
    mounts: tuple[Mount, ...]  # hostPath volumes mounted at their own path
    elsewhere: tuple[str, ...]  # hostPath volumes mounted at another path
    env: dict[str, str]
    host_namespaces: tuple[str, ...]  # hostNetwork, hostIPC
    no_escalation: bool  # allowPrivilegeEscalation: false
    non_root: bool  # runAsNonRoot


def granted(pod: Json, container: Json) -> Granted:
    pod_context, context = pod.get("securityContext", {}), container.get("securityContext", {})
    user = context.get("runAsUser", pod_context.get("runAsUser"))
    profile = context.get("appArmorProfile", pod_context.get("appArmorProfile", {}))
    volumes = {v["name"]: v["hostPath"] for v in pod.get("volumes", []) if "hostPath" in v}
    mounts, elsewhere = [], []
    for m in container.get("volumeMounts", []):
        if m["name"] in volumes:
            host = volumes[m["name"]]
            if host["path"] == m["mountPath"]:
                kind = host.get("type", "")
                mounts.append(Mount(host["path"], not m.get("readOnly", False), kind))
            else:
                elsewhere.append(f"{host['path']} at {m['mountPath']}")
    return Granted(
        root=user == 0,
        host_pid=bool(pod.get("hostPID")),
        privileged=bool(context.get("privileged")),
        capabilities=frozenset(
            c.upper().removeprefix("CAP_") for c in context.get("capabilities", {}).get("add", [])
        ),
        unconfined=profile.get("type") == "Unconfined",
        mounts=tuple(mounts),
        elsewhere=tuple(elsewhere),
        env={e["name"]: e.get("value", "") for e in container.get("env", [])},
        host_namespaces=tuple(k for k in ("hostNetwork", "hostIPC") if pod.get(k)),
        no_escalation=context.get("allowPrivilegeEscalation") is False,
        non_root=bool(context.get("runAsNonRoot", pod_context.get("runAsNonRoot"))),
    )


def agent_problems(daemonset: Json) -> list[str]:
    """Everything wrong with the agent's DaemonSet for the features its args enable."""
    pod = daemonset["spec"]["template"]["spec"]
    [container] = [c for c in pod["containers"] if c.get("args", [None])[0] == "agent"]
    names = {e["name"] for e in container.get("env", [])}
    unset = sorted({v for a in container["args"] for v in _REFERENCE.findall(a)} - names)
    undefined = [f"$({v}) in the args: no env {v} defines it (left as it is)" for v in unset]
    needs = agent_needs(agent_params(container["args"]))
    return undefined + problems(granted(pod, container), needs)


def problems(have: Granted, needs: list[Needs]) -> list[str]:
    out = [f"{n.feature}: {n.impossible}" for n in needs if n.impossible]
    for need in needs:
        out += [f"{need.feature} needs {item}" for item in _missing(have, need)]
    out += [f"{item}: no enabled feature needs it" for item in _extra(have, needs)]
    return out + _refused(have)


def _missing(have: Granted, need: Needs) -> list[str]:
    missing = ["runAsUser: 0"] if need.root and not have.root else []
    missing += ["hostPID: true"] if need.host_pid and not have.host_pid else []
    missing += ["privileged: true"] if need.privileged and not have.privileged else []
    if not have.privileged:
        missing += [f"capability {c}" for c in sorted(need.capabilities - have.capabilities)]
        missing += ["appArmorProfile Unconfined"] if need.unconfined and not have.unconfined else []
    for mount in need.mounts:
        if not any(
            m.covers(mount.path) and (m.writable or not mount.writable) for m in have.mounts
        ):
            how = "writable" if mount.writable else "read-only"
            missing.append(f"the host's {mount.path} mounted {how} at {mount.path}")
    missing += [f"env {k}={v}" for k, v in need.env if have.env.get(k) != v]
    return missing


def _extra(have: Granted, needs: list[Needs]) -> list[str]:
    root = any(n.root for n in needs)
    privileged = any(n.privileged for n in needs)
    capabilities = frozenset().union(*(n.capabilities for n in needs))
    extra = ["runAsUser: 0"] if have.root and not root else []
    extra += ["hostPID: true"] if have.host_pid and not any(n.host_pid for n in needs) else []
    extra += [f"{k}: true" for k in have.host_namespaces]
    extra += ["privileged: true"] if have.privileged and not privileged else []
    if privileged:
        extra += [f"capability {c} (privileged holds every one)" for c in sorted(have.capabilities)]
    else:
        extra += [f"capability {c}" for c in sorted(have.capabilities - capabilities)]
    if have.unconfined and (privileged or not any(n.unconfined for n in needs)):
        extra.append("appArmorProfile Unconfined")
    wanted = [m for n in needs for m in n.mounts]
    for mount in have.mounts:
        served = [w for w in wanted if mount.covers(w.path)]
        if not served:
            extra.append(f"hostPath {mount.path}")
        elif mount.writable and not any(w.writable for w in served):
            extra.append(f"hostPath {mount.path} writable (read-only is enough)")
    extra += [f"hostPath {where}" for where in have.elsewhere]
    return extra


def _refused(have: Granted) -> list[str]:
    out = []
    if have.no_escalation and (have.privileged or "SYS_ADMIN" in have.capabilities):
        out.append(
            "allowPrivilegeEscalation: false with privileged or CAP_SYS_ADMIN: the API server "
            "refuses the pod"
        )
    if have.non_root and have.root:
        out.append("runAsNonRoot with runAsUser: 0: the kubelet refuses to start the container")
    return out
