"""Reach the Kubernetes API: in-cluster when running in a pod, else a kubeconfig. Every call
through the client made here has a (connect, read) timeout."""

from __future__ import annotations

import os
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config

# Seconds to connect, and to wait for each read: without one, a connection the server (or a
# load balancer) stopped answering holds the activity's worker thread forever.
CONNECT_TIMEOUT_S, READ_TIMEOUT_S = 5.0, 30.0
REQUEST_TIMEOUT = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)


def request_timeout(read_s: float | None) -> tuple[float, float]:
    """(connect, read) for a read timeout of ``read_s`` (the --kube-timeout flag; None: the
    default)."""
    if read_s is None:
        return REQUEST_TIMEOUT
    return (min(CONNECT_TIMEOUT_S, read_s), read_s)


class TimeoutApiClient(k8s.ApiClient):
    """An ApiClient whose every call, from every generated API, has a timeout: the caller's
    ``_request_timeout`` if it gave one, else ``timeout``. A call that times out raises a
    urllib3 error, which ``api_errors`` makes a TransientError (retried)."""

    def __init__(
        self,
        configuration: k8s.Configuration | None = None,
        *,
        timeout: tuple[float, float] = REQUEST_TIMEOUT,
    ) -> None:
        super().__init__(configuration)
        self.timeout = timeout

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) < 6 and kwargs.get("_request_timeout") is None:  # 6th: the timeout
            kwargs["_request_timeout"] = self.timeout
        return super().call_api(*args, **kwargs)


class KubeconfigError(Exception):
    """No way to reach the Kubernetes API: not in a pod, and no kubeconfig that loads. Its
    message is one line that says which file and why."""


# What loading a kubeconfig raises: the loader's own error, an unreadable file, YAML that does
# not parse, or YAML of another shape (the loader indexes into it as it goes).
_UNUSABLE = (config.ConfigException, OSError, yaml.YAMLError, TypeError, ValueError, KeyError)


def api_client(
    kubeconfig: str | None = None, *, timeout: tuple[float, float] = REQUEST_TIMEOUT
) -> k8s.ApiClient:
    """``timeout``: (connect, read) seconds for every call. KubeconfigError when neither the
    pod's service account nor the kubeconfig gives a configuration."""
    if kubeconfig is None:
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            return TimeoutApiClient(timeout=timeout)
        except config.ConfigException:
            pass  # not in a pod: fall back to ~/.kube/config
    configuration = k8s.Configuration()
    try:
        config.load_kube_config(
            config_file=kubeconfig,  # type: ignore[no-untyped-call]
            client_configuration=configuration,
        )
    except _UNUSABLE as exc:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise KubeconfigError(
            f"no usable Kubernetes configuration: not running in a pod, and kubeconfig {where}: "
            f"{why}"
        ) from None
    return TimeoutApiClient(configuration, timeout=timeout)
