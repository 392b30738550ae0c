"""Which pods a drain evicts, leaves, or refuses to touch: kubectl drain's filters
(k8s.io/kubectl/pkg/drain/filters.go) with its defaults made explicit options. A refusal lists
the pods and names the option that would allow them, as kubectl does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from adapters.kubernetes.objects import Json, meta, timestamp
from remedy.core.errors import ActionRefused

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
LOCAL_STORAGE = "Pods with local storage (use --drain-delete-emptydir-data to override)"
UNMANAGED = "Pods that declare no controller (use --drain-force to override)"
ORPHANED_DAEMON = "Pods of a DaemonSet that is gone (use --drain-force to override)"


@dataclass(frozen=True)
class DrainRules:
    """kubectl drain's flags, kubectl's defaults, except two: DaemonSet pods are always left
    (--ignore-daemonsets: their controller puts them back at once), and Terminating pods on a
    NotReady node are not waited for after a minute (Karpenter's stuck-terminating rule, as
    --skip-wait-for-delete-timeout=60; 0 waits for them, kubectl's default): no kubelet is there
    to finish them."""

    delete_emptydir_data: bool = False
    force: bool = False
    skip_wait_for_delete_timeout_s: float = 60.0


@dataclass
class PodPlan:
    evict: list[Json] = field(default_factory=list)
    left: list[Json] = field(default_factory=list)  # DaemonSet and mirror pods
    refused: dict[str, list[Json]] = field(default_factory=dict)  # why → pods

    def refusal(self, node: str) -> ActionRefused | None:
        """kubectl's error: every reason with its pods, so one look says what to change."""
        if not self.refused:
            return None
        reasons = "; ".join(
            f"cannot delete {why}: {', '.join(name(p) for p in pods)}"
            for why, pods in self.refused.items()
        )
        return ActionRefused(f"drain of {node} refused: {reasons}")


def plan(
    pods: list[Json], rules: DrainRules, daemonset_exists: Callable[[str, str], bool]
) -> PodPlan:
    """Sort the node's pods, in kubectl's order of filters: finished pods are done (nothing
    to evict); a DaemonSet's pod is left if its DaemonSet exists, else refused unless
    ``force``; mirror pods are left; emptyDir pods are refused unless ``delete_emptydir_data``;
    pods with no controller are refused unless ``force``."""
    out = PodPlan()
    for pod in pods:
        if finished(pod):
            continue
        owner = controller_of(pod)
        if owner is not None and owner.get("kind") == "DaemonSet":
            if daemonset_exists(meta(pod).get("namespace", ""), str(owner.get("name"))):
                out.left.append(pod)
                continue
            if not rules.force:
                out.refused.setdefault(ORPHANED_DAEMON, []).append(pod)
                continue
        if mirror(pod):
            out.left.append(pod)
        elif local_storage(pod) and not rules.delete_emptydir_data:
            out.refused.setdefault(LOCAL_STORAGE, []).append(pod)
        elif owner is None and not rules.force:
            out.refused.setdefault(UNMANAGED, []).append(pod)
        else:
            out.evict.append(pod)
    return out


def controller_of(pod: Json) -> Json | None:
    """The owner reference marked ``controller: true`` (metav1.GetControllerOf)."""
    for ref in meta(pod).get("ownerReferences", []):
        if ref.get("controller") is True:
            found: Json = ref
            return found
    return None


def stuck_terminating(pod: Json, node_ready: bool, now: datetime, rules: DrainRules) -> bool:
    """Deleted longer than the skip-wait timeout ago on a NotReady node: not waited for."""
    since = timestamp(meta(pod).get("deletionTimestamp"))
    return (
        not node_ready
        and rules.skip_wait_for_delete_timeout_s > 0
        and since is not None
        and (now - since).total_seconds() > rules.skip_wait_for_delete_timeout_s
    )


def terminating(pod: Json) -> bool:
    return bool(meta(pod).get("deletionTimestamp"))


def mirror(pod: Json) -> bool:
    return MIRROR_ANNOTATION in meta(pod).get("annotations", {})


def local_storage(pod: Json) -> bool:
    return any("emptyDir" in v for v in pod.get("spec", {}).get("volumes", []))


def finished(pod: Json) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def name(pod: Json) -> str:
    return f"{meta(pod).get('namespace')}/{meta(pod).get('name')}"
