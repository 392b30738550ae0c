"""Least privilege for the agents: every render of deploy/ gives the agent's pods their own
Temporal credentials and nothing of the controller's, no codec key, and no setting that points
at one; the controller's pods hold the controller's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from workers.manifests.render import AgentFeatures, Install, load, render

Json = dict[str, Any]
AGENT_SECRET = "remedy-agent-temporal"
CONTROLLER_SECRETS = {"remedy-controller-temporal", "remedy-codec-key"}
CODEC_SETTING = "REMEDY_CODEC_KEY_FILE"


def secrets_of(pod: Json) -> Iterator[str]:
    """Every Secret a pod can read: volumes (projected too), env and envFrom."""
    for volume in pod.get("volumes", []):
        if "secret" in volume:
            yield volume["secret"]["secretName"]
        for source in volume.get("projected", {}).get("sources", []):
            if "secret" in source:
                yield source["secret"]["name"]
    for container in pod.get("containers", []) + pod.get("initContainers", []):
        for env in container.get("env", []):
            if ref := env.get("valueFrom", {}).get("secretKeyRef"):
                yield ref["name"]
        for source in container.get("envFrom", []):
            if "secretRef" in source:
                yield source["secretRef"]["name"]


def settings_of(pod: Json, docs: list[Json]) -> set[str]:
    """The environment a pod's containers get: their own and the ConfigMaps they take whole."""
    maps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    names = set()
    for container in pod.get("containers", []):
        names |= {e["name"] for e in container.get("env", [])}
        for source in container.get("envFrom", []):
            names |= set(maps.get(source.get("configMapRef", {}).get("name", ""), {}))
    return names


def pod_of(docs: list[Json], component: str) -> Json:
    [doc] = [
        d
        for d in docs
        if d["kind"] in ("DaemonSet", "Deployment")
        and d["metadata"]["labels"].get("app.kubernetes.io/component") == component
    ]
    spec: Json = doc["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize(
    "features",
    [AgentFeatures(), AgentFeatures(allow_reset=True, allow_reboot=True, kernel_log="kmsg")],
    ids=["defaults", "every-feature"],
)
def test_the_agent_mounts_no_controller_or_codec_credentials(features: AgentFeatures) -> None:
    docs = render(load(), Install(namespace="gpu-ops"), features)
    agent, controller = pod_of(docs, "agent"), pod_of(docs, "controller")
    assert set(secrets_of(agent)) == {AGENT_SECRET}
    assert set(secrets_of(controller)) == CONTROLLER_SECRETS
    assert CODEC_SETTING not in settings_of(agent, docs)
    assert not {v["secret"]["secretName"] for v in agent["volumes"] if "secret" in v} & (
        CONTROLLER_SECRETS
    )
