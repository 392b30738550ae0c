"""A tiny training job that speaks remedy's protocol end to end (docs/jobs.md#the-job-side).

It fits y = 3x + 1 with one weight and one bias: with PyTorch when it is installed, with a
plain loop otherwise. On start it restores its last checkpoint and reports ``resumed``; every
step it reports progress and its own step time; every ``--every`` steps, and at once when
remedy asks before a drain, it writes a checkpoint, reports it and acknowledges the request.
Nothing here needs a cluster right: reports go to stdout, the request comes from the pod's
downward-API volume.

    python examples/train/train.py --dir /ckpt --steps 2000 --every 200
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path
from typing import Any

from remedy_job import Reporter

try:  # a real framework when there is one; the protocol is the same without
    import torch
except ImportError:
    torch = None


class Plain:
    """One weight, one bias, plain gradient descent."""

    def __init__(self) -> None:
        self.w, self.b = 0.0, 0.0

    def step(self, lr: float) -> float:
        x = random.uniform(-1, 1)
        err = self.w * x + self.b - (3 * x + 1)
        self.w -= lr * 2 * err * x
        self.b -= lr * 2 * err
        return err * err

    def state(self) -> dict[str, Any]:
        return {"w": self.w, "b": self.b}

    def load(self, state: dict[str, Any]) -> None:
        self.w, self.b = state["w"], state["b"]


class Torch:
    def __init__(self) -> None:
        self.model = torch.nn.Linear(1, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)

    def step(self, lr: float) -> float:
        x = torch.rand(16, 1) * 2 - 1
        loss = torch.nn.functional.mse_loss(self.model(x), 3 * x + 1)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return float(loss)

    def state(self) -> dict[str, Any]:
        return {k: v.tolist() for k, v in self.model.state_dict().items()}

    def load(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict({k: torch.tensor(v) for k, v in state.items()})


def save(directory: Path, step: int, model: Plain | Torch) -> None:
    """Written whole, then renamed: a crash mid-write leaves the previous checkpoint."""
    tmp = directory / "checkpoint.json.tmp"
    tmp.write_text(json.dumps({"step": step, "model": model.state()}))
    os.replace(tmp, directory / "checkpoint.json")


def restore(directory: Path, model: Plain | Torch) -> int:
    try:
        saved = json.loads((directory / "checkpoint.json").read_text())
    except FileNotFoundError:
        return 0
    model.load(saved["model"])
    return int(saved["step"])


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--dir", type=Path, required=True, help="where checkpoints go")
    args.add_argument("--steps", type=int, default=1000, help="train until this step")
    args.add_argument("--every", type=int, default=100, help="checkpoint every N steps")
    args.add_argument("--step-s", type=float, default=0.0, help="sleep per step (a slow GPU)")
    opts = args.parse_args()
    opts.dir.mkdir(parents=True, exist_ok=True)
    model = Torch() if torch is not None else Plain()
    report = Reporter()
    step = restore(opts.dir, model)
    report.resumed(step)
    while step < opts.steps:
        began = time.monotonic()
        loss = model.step(lr=0.05)
        if opts.step_s:
            time.sleep(opts.step_s)
        step += 1
        # This rank's own work per step, for remedy's straggler detector: on GPUs, CUDA events
        # around forward and backward, without the wait in the all-reduce (docs/jobs.md).
        report.timed(step, compute_s=time.monotonic() - began)
        report.step(step)
        asked = report.checkpoint_requested()  # a drain is coming: keep the work now
        if asked or step % opts.every == 0 or step == opts.steps:
            began = time.monotonic()
            save(opts.dir, step, model)
            report.checkpoint(step, seconds=time.monotonic() - began)
            if asked:
                report.acknowledge(step)
    print(f"done at step {step}, loss {loss:.4f}", flush=True)


if __name__ == "__main__":
    main()
