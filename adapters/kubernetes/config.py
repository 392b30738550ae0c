"""Reach the Kubernetes API: in-cluster when running in a pod, else a kubeconfig."""

from __future__ import annotations

from kubernetes import client as k8s
from kubernetes import config


def api_client(kubeconfig: str | None = None) -> k8s.ApiClient:
    if kubeconfig is None:
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            return k8s.ApiClient()
        except config.ConfigException:
            pass  # not in a pod: fall back to ~/.kube/config
    configuration = k8s.Configuration()
    config.load_kube_config(
        config_file=kubeconfig,  # type: ignore[no-untyped-call]
        client_configuration=configuration,
    )
    return k8s.ApiClient(configuration)
