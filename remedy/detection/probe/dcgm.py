"""Reading `dcgmi diag -j`: each test's result on each GPU, as load problems.

Two shapes are in the field (NVIDIA/DCGM ``dcgmi/Diag.cpp``; fixtures in tests/data/dcgm/):

- DCGM 3.x: ``{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name",
  "results": [{"gpu_id": "3", "status": "Fail", "warnings": [{"warning", "error_id",
  "error_category", "error_severity"}], "info": "..."}]}]}]}, "version", ...}``; Deployment
  tests carry one result for all GPUs, without a ``gpu_id``.
- DCGM 4.x: ``{"DCGM Diagnostic": {"test_categories": [... "results": [{"entity_group": "GPU",
  "entity_group_id": 1, "entity_id": 3, "status", "warnings", "info": [...]}], "test_summary":
  {"status"}]}, "entity_groups": [...], "metadata": {...}}``.

Either may say ``"runtime_error"`` instead of results, or print a line before its JSON. A
status is Pass, Fail, Warn or Skip (4.x folds Warn into Fail in JSON). Fail closed: an answer
with no JSON, no diagnostic, or no test that ran is "could not run", never a pass; so is each GPU
on which no test ran (DCGM skips a busy GPU), even when others were tested.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from remedy.core.models import Severity
from remedy.detection.probe.load import LoadProblem, LoadReason, LoadReport, could_not_run

ROOT_KEYS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")  # 4.x, 3.x
ENGINE = "dcgm"
# The diagnostic plugin's own figure (nvvs/plugin_src/diagnostic/DiagnosticPlugin.cpp).
_GFLOPS = re.compile(r"GPU (\d+) calculated at approximately ([0-9.]+) gigaflops")
_RAN = {"pass", "fail", "warn"}
_OK = {"pass", "skip", "skipped", "not run"}


def parse_diag(text: str, asked: Sequence[int] = ()) -> LoadReport:
    """The load report of one `dcgmi diag -j` answer over the GPUs ``asked`` (none: every GPU
    DCGM found); each must have a test that ran on it."""
    doc = _json_in(text)
    if doc is None:
        return could_not_run(f"dcgmi diag answered no JSON: {_clip(text)}", ENGINE)
    root = next((doc[k] for k in ROOT_KEYS if isinstance(doc.get(k), dict)), None)
    if root is None:
        return could_not_run(f"dcgmi diag answered no diagnostic: {_clip(text)}", ENGINE)
    if root.get("runtime_error"):
        return could_not_run(f"dcgmi diag: {root['runtime_error']}", ENGINE)
    problems: list[LoadProblem] = []
    gpus: set[int] = set(_entities(doc))
    throughput: dict[int, float] = {}
    ran, tested = False, set[int]()
    for test_name, test in _tests(root):
        found = len(problems)
        for result in _dicts(test.get("results")):
            gpu = _gpu_of(result)
            if gpu is not None:
                gpus.add(gpu)
            for info in _strings(result.get("info")):
                for index, gflops in _GFLOPS.findall(info):
                    throughput[int(index)] = float(gflops) / 1000
            status = _status(result)
            if status in _RAN:  # a node-wide result (3.x's Deployment tests) tests no GPU
                ran = True
                tested.update(_gpus_named(result))
            if status not in _OK:
                problems.append(_problem(test_name, gpu, status, result))
        summary = test.get("test_summary")
        if isinstance(summary, dict) and _status(summary) not in _OK and len(problems) == found:
            # 4.x: a failure no entity carries (a global error) shows only in the summary.
            problems.append(_problem(test_name, None, _status(summary), summary))
    if not ran:
        return could_not_run("dcgmi diag ran no test: every result was skipped or absent", ENGINE)
    problems += [_untested(gpu) for gpu in sorted(set(asked) or gpus) if gpu not in tested]
    return LoadReport(engine=ENGINE, gpus=sorted(gpus), problems=problems, throughput=throughput)


def _problem(test: str, gpu: int | None, status: str, result: dict[str, Any]) -> LoadProblem:
    warned = status == "warn"
    said = "; ".join(_warnings(result.get("warnings"))) or "no reason given"
    where = f"GPU {gpu}" if gpu is not None else "node"
    return LoadProblem(
        gpu=gpu,
        reason=LoadReason.DCGM_DIAG_WARNING if warned else LoadReason.DCGM_DIAG_FAILED,
        severity=Severity.WARNING if warned else Severity.CRITICAL,
        evidence=f"{where}: DCGM {test} {status}: {said}",
    )


def _untested(gpu: int) -> LoadProblem:
    return LoadProblem(
        gpu=gpu,
        reason=LoadReason.COULD_NOT_RUN,
        evidence=f"GPU {gpu}: DCGM ran no test on it: every result was skipped or absent",
    )


def _json_in(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (dcgmi may print a line before it)."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        doc, _end = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _tests(root: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for category in _dicts(root.get("test_categories")):
        for test in _dicts(category.get("tests")):
            yield str(test.get("name", "?")), test


def _status(result: dict[str, Any]) -> str:
    return str(result.get("status", "")).strip().lower()


def _entities(doc: dict[str, Any]) -> Iterator[int]:
    """4.x lists the entities it ran on; 3.x its GPUs' serials by index."""
    for group in _dicts(doc.get("entity_groups")):
        if group.get("entity_group") == "GPU":
            for entity in _dicts(group.get("entities")):
                if isinstance(entity.get("entity_id"), int):
                    yield entity["entity_id"]
    serials = doc.get("GPU Device Serials")
    if isinstance(serials, dict):
        yield from (int(k) for k in serials if str(k).isdigit())


def _gpu_of(result: dict[str, Any]) -> int | None:
    if "entity_id" in result:  # 4.x: only a GPU entity is a GPU index
        group = result.get("entity_group")
        return int(result["entity_id"]) if group == "GPU" else None
    raw = str(result.get("gpu_id", result.get("gpu_ids", ""))).strip()
    return int(raw) if raw.isdigit() else None  # "0,1,2" or none: every GPU


def _gpus_named(result: dict[str, Any]) -> list[int]:
    """The GPUs one result is about: its GPU, or 3.x's ``gpu_ids`` list; none when node-wide."""
    gpu = _gpu_of(result)
    if gpu is not None:
        return [gpu]
    raw = result.get("gpu_ids", "") if "entity_id" not in result else ""
    return [int(n) for n in re.findall(r"\d+", str(raw))]


def _warnings(raw: Any) -> list[str]:
    said = []
    for item in raw if isinstance(raw, list) else [raw] if raw else []:
        if isinstance(item, dict):
            # 3.x's Deployment tests put the message under "warnings" (sic).
            text = item.get("warning", item.get("warnings", ""))
            code = item.get("error_id")
            said.append(f"{text} (DCGM error {code})" if code is not None else str(text))
        else:
            said.append(str(item))
    return said


def _strings(raw: Any) -> list[str]:
    return [str(s) for s in raw] if isinstance(raw, list) else [str(raw)] if raw else []


def _dicts(raw: Any) -> list[dict[str, Any]]:
    return [d for d in raw if isinstance(d, dict)] if isinstance(raw, list) else []


def _clip(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return (flat[:limit] + "…") if len(flat) > limit else flat or "(nothing)"
