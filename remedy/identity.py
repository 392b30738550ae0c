"""Who sent a report: only a node's own agent speaks for that node.

Every finding a ladder takes carries a token that proves who sent it; the controller reviews it
(``NodeIdentity``) before the report starts or feeds a ladder. On Kubernetes the token is the
sender's bound service-account token (audience ``remedy``, short-lived, projected into the
pod): TokenReview answers its service account and, for a pod's token, the node the pod runs on
— a stolen agent token speaks for its own node only, and stops when the pod is gone. The
controller's own token speaks for any node (the findings it makes: a silent agent, a problem
condition, an orphaned cordon). The simulated fleet mints tokens of the same meaning.

Pure: the seams are protocols, implemented in ``adapters/kubernetes/identity.py`` and
``adapters/sim/identity.py``.
"""

from __future__ import annotations

from typing import Protocol

from remedy.models import Frozen

AUDIENCE = "remedy"  # the audience remedy's tokens are minted for, and reviewed against
MAX_TOKEN = 8192  # characters: a bound service-account token is about 1 KiB


class IdentityRefused(Exception):
    """A token that proves nothing: unknown, expired, for another audience, of a pod that is
    gone, or of an account that is neither remedy's agent nor its controller. The message says
    which, and never quotes the token."""


class Speaker(Frozen):
    """Who a reviewed token belongs to."""

    subject: str  # the account, e.g. "system:serviceaccount:remedy:remedy-agent"
    node: str = ""  # an agent's token: the node its pod runs on
    controller: bool = False  # remedy's controller: it speaks for any node

    def why_not_for(self, node: str) -> str:
        """Why this speaker may not report for ``node`` (empty: it may). For example, the agent
        of gpu-node-001 reporting for gpu-node-002 is refused with "gpu-node-001's agent
        (system:serviceaccount:remedy:remedy-agent) may not speak for gpu-node-002"."""
        if self.controller or (self.node and self.node == node):
            return ""
        if not self.node:
            return f"{self.subject} is bound to no node: it may not speak for {node}"
        return f"{self.node}'s agent ({self.subject}) may not speak for {node}"

    def describe(self) -> str:
        if self.controller:
            return f"the controller ({self.subject})"
        return f"{self.node}'s agent ({self.subject})"


class NodeIdentity(Protocol):
    """The controller's side: who a token belongs to."""

    def review(self, token: str) -> Speaker:
        """The token's speaker; IdentityRefused saying why it proves nothing."""


class Credential(Protocol):
    """A sender's side: the token it proves itself with now (read again each time: the kubelet
    rotates a projected token before it expires)."""

    def token(self) -> str: ...
