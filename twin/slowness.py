"""What a slow node costs a lockstep job, with the straggler detector and without it.

A lockstep job runs at its slowest node's pace: a node whose steps take (1 + f) times as long
stretches every step of the job by as much, so the job makes 1/(1 + f) of its progress and
loses f/(1 + f) of every minute the node is slow. Worked example: f = 0.25, slow for 60
minutes, costs 60 × 0.25 / 1.25 = 12 minutes of the whole job's progress.

With detection, the node is first a suspect at minute s; the proof runs for ``PROVE`` minutes
and confirms it when the node is slow in any of them (an intermittent one may rest through
it: then nothing is swapped and a later suspicion tries again); at s + ``PROVE`` the node is
swapped out through the checkpoint protocol: a checkpoint first (no work lost), then the
elastic restart, the whole job down ``SWAP_RESTART``; with a spare it goes on at full speed,
without one at (N - 1)/N until the node is back (``NODE_BACK``). Continuing the example with
s = 5 min after onset: 15 slow minutes cost 3 min, the swap 5.5 min: 8.5 min instead of 12.

Without detection nobody names the node until a person finds it (``MANUAL_FIND``) or its
fault passes; finding it costs the same swap."""

from __future__ import annotations

from pydantic import BaseModel

from twin.slow_nodes import SlowFault

# Minutes from the first suspicion to the proof's verdict: the deep diagnose's load test on the
# node against its peers, run in the job's next checkpoint window, so the job pays nothing for
# it (an assumption: a window at least that often; the deep diagnose's own figure is minutes).
PROVE = 10
SWAP_CHECKPOINT = 0.5  # minutes: the swap writes a checkpoint first (JobConfig's 30 s)
SWAP_RESTART = 5.0  # minutes the whole job is down for the elastic restart (JobConfig.restart)
NODE_BACK = 4 * 60  # minutes, no spare: a node provisioned and admitted (ActionCosts.replace)
# Detection off: a person sees the job run slow and finds the node by hand after this long
# (an assumption: a slow job raises no alarm; someone bisects the nodes within half a day).
MANUAL_FIND = 12 * 60


def stretch(factor: float) -> float:
    """The share of each slow minute a lockstep job loses: f / (1 + f)."""
    return factor / (1 + factor)


class Cost(BaseModel):
    """Minutes of the whole job's progress one slow fault costs."""

    slow: float  # while the node stayed slow in the job
    swap: float  # the checkpoint and restart that took it out
    shrunk: float  # no spare: the job at N - 1 nodes, in whole-job minutes

    @property
    def total(self) -> float:
        return self.slow + self.swap + self.shrunk


def life(fault: SlowFault) -> int:
    """The minute the fault leaves the job with nobody acting: it passes or a person finds it."""
    found = fault.onset + MANUAL_FIND
    return found if fault.lasts is None else min(fault.onset + fault.lasts, found)


def proves(fault: SlowFault, suspected: int) -> bool:
    """The proof started at ``suspected`` confirms the node: slow in one of its minutes."""
    return any(fault.slow_at(m) for m in range(suspected, suspected + PROVE))


def cost(fault: SlowFault, swapped: int | None, nodes: int, spare: bool = True) -> Cost:
    """What ``fault`` costs when it is swapped out at minute ``swapped`` (None: never, by the
    detector: it stays until ``life``)."""
    end = life(fault)
    found_by_hand = fault.lasts is None or fault.lasts > MANUAL_FIND
    if swapped is None or swapped >= end:
        swapped, acted = end, found_by_hand
    else:
        acted = True
    slow = stretch(fault.factor) * fault.slow_minutes(fault.onset, swapped)
    swap = SWAP_CHECKPOINT + SWAP_RESTART if acted else 0.0
    shrunk = NODE_BACK / nodes if acted and not spare else 0.0
    return Cost(slow=slow, swap=swap, shrunk=shrunk)
