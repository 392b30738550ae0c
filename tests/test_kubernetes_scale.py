"""Scale and robustness of the Kubernetes calls (issue 17): lists read a page at a time as raw
JSON (defect 3), a node's NodeClaim found from its owner reference (defect 3), a missing
NodeClaim CRD refused rather than read as a gone node (defect 6), and a timeout on every call
(defect 10)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.kubernetes.cluster import kubernetes_cluster
from adapters.kubernetes.config import api_client
from remedy.errors import TransientError

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers (a stuck server or load balancer)."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return  # the listener closed: the test is over

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for connection in accepted:  # a client still waiting (the old code) sees it hang up
        connection.close()


def within(seconds: float, fn: Any) -> Any:
    """``fn()``'s result or exception; a call still blocked after ``seconds`` fails the test
    (in a daemon thread: without a timeout it would block forever)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(fn())
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        pytest.fail(f"the call was still blocked after {seconds} s: it has no timeout")
    return outcome[0]


def test_defect_10_a_call_to_a_server_that_never_answers_fails_transiently(
    silent_server: int, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(port=silent_server))
    # As `remedy controller --kube-timeout 0.2` builds it; every call gets the timeout.
    cluster = kubernetes_cluster(api_client(str(kubeconfig), timeout=(0.2, 0.2)))
    for call in (cluster.fleet.nodes, lambda: cluster.marks.conditions("n1")):
        error = within(20, call)
        assert isinstance(error, TransientError), error
        assert "timed out" in str(error)
