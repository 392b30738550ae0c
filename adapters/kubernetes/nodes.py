"""What every Kubernetes seam shares about a node: reading it as JSON, the opt-out label, the
pods on it, an Event on it, the dry-run switch and the clock. One per cluster: the concerns
built on it agree on all of these."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes import client as k8s

from adapters.kubernetes import repairers
from adapters.kubernetes.errors import NotFound, api_errors
from adapters.kubernetes.listing import list_pages
from adapters.kubernetes.objects import CONTROLLER_MANAGER, Json, as_json, meta, record_event
from remedy.core.errors import ActionRefused, NodeGone, OtherRepairer
from remedy.core.events import EventReason

PREFIX = "remedy.io"
OPT_OUT_LABEL = f"{PREFIX}/managed"


def utcnow() -> datetime:
    return datetime.now(UTC)


class NodeApi:
    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        dry_run: bool = False,
        clock: Callable[[], datetime] = utcnow,
        field_manager: str = CONTROLLER_MANAGER,
    ) -> None:
        """``field_manager``: who this process writes as (objects.CONTROLLER_MANAGER or
        AGENT_MANAGER); every write through the seams built on it names it."""
        self.api, self.core = api, k8s.CoreV1Api(api)
        self.dry_run, self.clock = dry_run, clock
        self.field_manager = field_manager
        self._uids: dict[str, str] = {}  # each node's uid as last read: its Events carry it

    def json(self, obj: object) -> Json:
        return as_json(self.api, obj)

    def node(self, name: str) -> Json:
        with api_errors("get", f"nodes/{name}"):
            found = self.json(self.core.read_node(name))
        self._uids[name] = meta(found).get("uid", "")
        return found

    def managed(self, node: Json) -> None:
        """Refuse a node labelled ``remedy.io/managed=false``: its owners act on it themselves."""
        if meta(node).get("labels", {}).get(OPT_OUT_LABEL) == "false":
            raise ActionRefused(
                f"node {meta(node).get('name')} opted out of remedy ({OPT_OUT_LABEL}=false)"
            )

    def alone(self, node: Json) -> None:
        """Refuse a node another repairer is at work on (adapters/kubernetes/repairers.py), with
        an Event that says who: remedy never takes part in someone else's repair. Before every
        change that takes work away (cordon, drain, job kill, the GPU hand-off for a reset)."""
        who = self.other_repairer(node)
        if who is None:
            return
        name = meta(node).get("name", "")
        self.event(name, EventReason.OTHER_REPAIRER, f"remedy does not act: {who}", warning=True)
        raise OtherRepairer(OtherRepairer.said(name, who))

    def other_repairer(self, node: Json) -> str | None:
        """Who else is at work on the node: its own marks, then (the controller only: the
        agent's role reads no NodeClaims) Karpenter's NodeClaim of it being deleted. A claim
        that is gone, or a cluster without the NodeClaim CRD, is none: the Node's own marks
        say the rest (Karpenter deletes the node next, tainted)."""
        seen = repairers.on_node(node)
        claim = repairers.claim_name(node)
        if seen is not None or claim is None or self.field_manager != CONTROLLER_MANAGER:
            return seen
        try:
            with api_errors("get", repairers.NODECLAIM_RESOURCE, missing=NotFound):
                custom = k8s.CustomObjectsApi(self.api)
                found = self.json(custom.get_cluster_custom_object(*repairers.NODECLAIMS, claim))
        except NotFound:
            return None
        return repairers.on_claim(found)

    def pods(self, node: str, label_selector: str | None = None) -> list[Json]:
        """The pods on the node (those ``label_selector`` selects, if given)."""
        items = list_pages(
            self.core.list_pod_for_all_namespaces,
            what="pods",
            field_selector=f"spec.nodeName={node}",
            label_selector=label_selector,
        )
        return [p for p in items if p.get("spec", {}).get("nodeName") == node]  # belt and braces

    def sends(self, node: str, would: str) -> bool:
        """The gate every change remedy makes to the cluster passes. In dry run it records
        "would …" as an Event on the node, and the caller sends nothing and claims nothing
        (no Event that says it happened, an answer that says "dry run: would …")."""
        if self.dry_run:
            self.event(node, EventReason.DRY_RUN, f"would {would}")
            return False
        return True

    def event(self, node: str, reason: str, message: str, warning: bool = False) -> None:
        """An Event on the node: `kubectl describe node` tells what remedy did and why (it
        shows the events whose involvedObject carries the node's uid)."""
        uid = self._uids.get(node)
        if uid is None:
            try:
                uid = meta(self.node(node)).get("uid", "")
            except NodeGone:
                uid = ""  # gone: the Event still tells the story by name
        record_event(
            self.core,
            k8s.V1ObjectReference(kind="Node", name=node, api_version="v1", uid=uid or None),
            reason,
            message,
            self.clock(),
            field_manager=self.field_manager,
            warning=warning,
        )


def ready(node: Json) -> bool:
    """The node's Ready condition is True: its kubelet is there to finish what is deleted."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in node.get("status", {}).get("conditions", [])
    )


def has_taint(node: Json, taint: Json) -> bool:
    return any(t.get("key") == taint["key"] for t in node.get("spec", {}).get("taints", []))


def daemonset(pod: Json) -> bool:
    return any(ref.get("kind") == "DaemonSet" for ref in meta(pod).get("ownerReferences", []))
