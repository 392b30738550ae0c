"""The GPU agent image, checked without a Docker engine: it carries the load-test engines, it
installs remedy as the slim image does, and the agent DaemonSet runs it (the controller does
not)."""

from __future__ import annotations

import re

import yaml

from tests.conftest import ROOT
from workers.manifests.needs import agent_params
from workers.manifests.render import load

GPU = (ROOT / "Dockerfile.gpu").read_text()
SLIM = (ROOT / "Dockerfile").read_text()


def copies(text: str) -> list[str]:
    return re.findall(r"^COPY (.+)$", text, re.M)


def test_gpu_image_carries_torch_and_dcgm_and_installs_remedy_like_the_slim_one() -> None:
    assert re.search(r"^FROM nvidia/cuda:\S+-ubuntu", GPU, re.M)
    assert 'pip install "torch==${TORCH_VERSION}"' in GPU
    assert "datacenter-gpu-manager-4-cuda12" in GPU
    assert copies(GPU) == copies(SLIM)  # the same code and runbooks
    for source in re.findall(r"^COPY (\S+)", GPU, re.M):
        assert (ROOT / source).exists(), source
    assert 'ENTRYPOINT ["remedy"]' in GPU and re.search(r"^USER \d+", GPU, re.M)
    assert "torch" not in SLIM  # the controller image stays slim


def test_the_agent_runs_the_gpu_image_and_the_controller_the_slim_one() -> None:
    def image(manifest: str) -> str:
        docs = list(yaml.safe_load_all((ROOT / "deploy" / manifest).read_text()))
        [deployed] = [d for d in docs if d and d["kind"] in ("DaemonSet", "Deployment")]
        return str(deployed["spec"]["template"]["spec"]["containers"][0]["image"])

    assert image("agent.yaml").startswith("remedy-agent-gpu:")
    assert image("controller.yaml").startswith("remedy:")
    assert "Dockerfile.gpu" in (ROOT / "deploy" / "agent.yaml").read_text()


def test_the_gpu_image_has_journalctl_for_the_kernel_log_the_agent_reads() -> None:
    """deploy/agent.yaml reads the host's journal (`journalctl -D`); the base image has none."""
    [daemonset] = [d for d in load() if d["kind"] == "DaemonSet"]
    args = daemonset["spec"]["template"]["spec"]["containers"][0]["args"]
    assert agent_params(args)["kernel_log"].startswith("journal:")
    installs = re.findall(r"apt-get install -y --no-install-recommends ([^\\;]+)", GPU)
    assert any("systemd" in i.split() for i in installs)  # Ubuntu's package of journalctl
