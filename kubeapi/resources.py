"""The resources the emulator serves: where each lives in the URL space, whether it is
namespaced, and whether it is a built-in type (strategic merge patch and the OpenAPI schema
apply) or a custom resource (they do not: a real API server answers 415 to strategic merge)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    group_version: str  # "v1", "apps/v1", "karpenter.sh/v1"
    plural: str
    kind: str
    namespaced: bool
    builtin: bool = True
    status_subresource: bool = True

    @property
    def key(self) -> str:
        """How tests name it: ``"v1/nodes"``, ``"batch/v1/jobs"``."""
        return f"{self.group_version}/{self.plural}"

    @property
    def prefix(self) -> str:
        return "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"


RESOURCES = (
    Resource("v1", "nodes", "Node", namespaced=False),
    Resource("v1", "pods", "Pod", namespaced=True),
    Resource("v1", "events", "Event", namespaced=True, status_subresource=False),
    Resource("v1", "namespaces", "Namespace", namespaced=False),
    Resource("v1", "configmaps", "ConfigMap", namespaced=True, status_subresource=False),
    Resource("apps/v1", "daemonsets", "DaemonSet", namespaced=True),
    Resource("apps/v1", "replicasets", "ReplicaSet", namespaced=True),
    Resource("apps/v1", "statefulsets", "StatefulSet", namespaced=True),
    Resource("batch/v1", "jobs", "Job", namespaced=True),
    Resource("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True),
    # Dynamic Resource Allocation: which device a pod's claim was given, and the devices each
    # node's driver publishes (a slice has no status).
    Resource("resource.k8s.io/v1", "resourceclaims", "ResourceClaim", namespaced=True),
    Resource(
        "resource.k8s.io/v1",
        "resourceslices",
        "ResourceSlice",
        namespaced=False,
        status_subresource=False,
    ),
    # DRA device taints: remedy's per-GPU quarantine (adapters/kubernetes/gpu_scope.py)
    Resource("resource.k8s.io/v1beta2", "devicetaintrules", "DeviceTaintRule", namespaced=False),
    Resource("karpenter.sh/v1", "nodeclaims", "NodeClaim", namespaced=False, builtin=False),
    # What remedy's chart installs (tests/test_chart_install.py): its workloads, their
    # accounts and rights, and the agent's admission policy.
    Resource("v1", "serviceaccounts", "ServiceAccount", namespaced=True, status_subresource=False),
    Resource("v1", "services", "Service", namespaced=True),
    Resource("apps/v1", "deployments", "Deployment", namespaced=True),
    *(
        Resource("rbac.authorization.k8s.io/v1", plural, kind, namespaced, status_subresource=False)
        for plural, kind, namespaced in (
            ("clusterroles", "ClusterRole", False),
            ("clusterrolebindings", "ClusterRoleBinding", False),
            ("roles", "Role", True),
            ("rolebindings", "RoleBinding", True),
        )
    ),
    Resource(
        "admissionregistration.k8s.io/v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        namespaced=False,
    ),
    Resource(
        "admissionregistration.k8s.io/v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        namespaced=False,
        status_subresource=False,
    ),
)
BY_KEY = {r.key: r for r in RESOURCES}
BY_PATH = {(r.prefix, r.plural): r for r in RESOURCES}
BY_KIND = {(r.group_version, r.kind): r for r in RESOURCES}


def resource(key: str) -> Resource:
    try:
        return BY_KEY[key]
    except KeyError:
        raise KeyError(
            f"the emulator does not serve {key!r} (known: {', '.join(BY_KEY)})"
        ) from None
