"""The breakers as their budgets publish them (remedy.disruption.quarantine.BreakerState): one
ConfigMap in
remedy's namespace, one key per pool. The controller writes a pool's key when its breaker
changes; a ladder's first cordon and each node's agent read the whole map in one GET (the agent
may read only this ConfigMap: deploy/rbac.yaml)."""

from __future__ import annotations

from kubernetes import client as k8s

from adapters.kubernetes.errors import NotFound, api_errors
from adapters.kubernetes.nodes import NodeApi
from remedy.disruption.quarantine import BreakerState

BREAKERS = "remedy-breakers"
NAMESPACE = "remedy"


class KubernetesBreakerBoard:
    def __init__(self, nodes: NodeApi, namespace: str = NAMESPACE) -> None:
        self._nodes, self._namespace = nodes, namespace

    def publish(self, pool: str, state: BreakerState) -> None:
        core, where = self._nodes.core, f"configmaps/{self._namespace}/{BREAKERS}"
        body = {"data": {pool: state.value}}  # a merge: the other pools' keys stay
        try:
            with api_errors("patch", where, missing=NotFound):
                core.patch_namespaced_config_map(
                    BREAKERS, self._namespace, body, field_manager=self._nodes.field_manager
                )
            return
        except NotFound:
            pass  # the first breaker to publish creates it
        made = k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=BREAKERS), data=body["data"])
        with api_errors("create", where):
            core.create_namespaced_config_map(
                self._namespace, made, field_manager=self._nodes.field_manager
            )

    def holding(self, pools: list[str]) -> list[str]:
        try:
            with api_errors("get", f"configmaps/{self._namespace}/{BREAKERS}", missing=NotFound):
                found = self._nodes.core.read_namespaced_config_map(BREAKERS, self._namespace)
        except NotFound:
            return []  # no breaker ever published: every one closed
        data = found.data or {}
        return [p for p in pools if data.get(p, BreakerState.CLOSED.value) != BreakerState.CLOSED]
