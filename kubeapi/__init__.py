"""A strict Kubernetes API emulator for remedy's tests and benches: it applies patches, versions,
validation, selectors, pagination, deletion and evictions the way kube-apiserver does, so an
adapter that a real server would refuse fails here first."""

from kubeapi.server import ApiServer, Request

__all__ = ["ApiServer", "Request"]
