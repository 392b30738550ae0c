"""The Helm chart (charts/remedy) as the one source of deploy/: ``helm template`` with the
chart's defaults, split by template into deploy/*.yaml (`make manifests`). The chart's
runbooks/ is a link to the shipped ones (helm follows it, and `helm package` stores the files).
helm is a build tool here, never the product's: `make tools` installs it into .tools/bin."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "remedy"
DEPLOY = ROOT / "deploy"
RUNBOOKS = ROOT / "runbooks"
HELM = ROOT / ".tools" / "bin" / "helm"
RELEASE = NAMESPACE = "remedy"  # the names deploy/ is written with
HEADER = "# generated from charts/remedy by make manifests — do not edit\n"
_SOURCE = re.compile(r"^# Source: [^/]+/templates/(?P<file>[^\n]+)\n", re.MULTILINE)

Json = dict[str, Any]


def helm() -> Path:
    if not HELM.exists():
        raise FileNotFoundError(f"{HELM}: no helm there: run make tools")
    return HELM


def template(*args: str, namespace: str = NAMESPACE, chart: Path = CHART) -> str:
    """``helm template`` of the chart for release remedy; ``args``: --set and -f options.
    ValueError with helm's message when it refuses (a value the chart fails on)."""
    command = [str(helm()), "template", RELEASE, str(chart), "--namespace", namespace, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise ValueError(done.stderr.strip())
    return done.stdout


def objects(text: str) -> list[Json]:
    return [d for d in yaml.safe_load_all(text) if d]


def by_template(text: str) -> dict[str, str]:
    """The rendered documents by the template that made them, each file's documents in the
    order helm printed them (its install order)."""
    files: dict[str, list[str]] = {}
    for document in text.split("\n---\n"):
        found = _SOURCE.search(document)
        if found is None:
            continue
        body = document[found.end() :].strip("\n")
        files.setdefault(found["file"], []).append(body)
    return {name: "\n---\n".join(docs) + "\n" for name, docs in files.items()}


def write_deploy(deploy: Path = DEPLOY) -> list[Path]:
    """deploy/*.yaml as the chart renders them for its defaults; a deploy/*.yaml no template
    renders is removed (it would be applied with the rest)."""
    written = []
    for name, text in sorted(by_template(template()).items()):
        path = deploy / name
        path.write_text(HEADER + text)
        written.append(path)
    for stale in set(deploy.glob("*.yaml")) - set(written):
        stale.unlink()
    return written


def main() -> None:
    for path in write_deploy():
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
