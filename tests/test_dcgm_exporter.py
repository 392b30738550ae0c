"""dcgm-exporter's Xid metric read as a gauge of the last Xid (remedy/detection/dcgm_exporter.py).

Samples: tests/data/dcgm_exporter/h100_xid79.prom (dcgm-exporter's HELP/TYPE lines and labels:
its metrics template declares ``# TYPE DCGM_FI_DEV_XID_ERRORS gauge`` with "Value of the last
XID error encountered."); the MIG lines are an A800 exporter's output with GPU_I_PROFILE and
GPU_I_ID labels (one GPU, one value per instance)."""

from __future__ import annotations

from pathlib import Path

import pytest

from remedy.detection.dcgm_exporter import ExpositionError, LastXid, last_xids, new_xids

DATA = Path(__file__).parent / "data" / "dcgm_exporter"
GPU0 = "GPU-34319582-d595-d1c7-d1d2-179bcfa61660"
GPU1 = "GPU-1f027ee8-6e1e-2b8c-0108-3d370e5f0418"
MIG = (
    'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-1f027ee8-6e1e-2b8c-0108-3d370e5f0418",'
    'device="nvidia0",modelName="NVIDIA A800-SXM4-80GB",GPU_I_PROFILE="2g.20gb",GPU_I_ID="3",'
    'Hostname="msxf-hpc-64-35-ai",DCGM_FI_DRIVER_VERSION="535.129.03"} {value}\n'
)


def test_the_value_is_the_last_xids_code_not_a_count() -> None:
    xids = last_xids((DATA / "h100_xid79.prom").read_text())
    assert xids == {GPU0: LastXid(GPU0, 79), GPU1: LastXid(GPU1, 0)}
    assert new_xids({GPU1: LastXid(GPU1, 0)}, xids) == [LastXid(GPU0, 79)]  # one Xid 79
    assert new_xids(None, xids) == []  # the first reading is the baseline: the 79 is undated


def test_a_change_is_a_new_xid_and_the_same_code_again_is_not_seen() -> None:
    before = {GPU0: LastXid(GPU0, 79), GPU1: LastXid(GPU1, 0)}
    again = {GPU0: LastXid(GPU0, 79), GPU1: LastXid(GPU1, 0)}  # a second Xid 79: no change
    changed = {GPU0: LastXid(GPU0, 48), GPU1: LastXid(GPU1, 0)}
    cleared = {GPU0: LastXid(GPU0, 0), GPU1: LastXid(GPU1, 0)}  # the exporter restarted
    assert new_xids(before, again) == []
    assert new_xids(before, changed) == [LastXid(GPU0, 48)]
    assert new_xids(before, cleared) == []


def test_mig_instances_of_one_gpu_are_one_gpu() -> None:
    text = MIG.replace("{value}", "0") + MIG.replace("{value}", "0").replace('"3"', '"4"')
    assert last_xids(text) == {GPU1: LastXid(GPU1, 0)}


@pytest.mark.parametrize(
    "text",
    [
        'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-a"} 7.5\n',  # no Xid is 7.5
        'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-a"} NaN\n',
        'DCGM_FI_DEV_XID_ERRORS{device="nvidia0"} 13\n',  # which GPU?
        'DCGM_FI_DEV_XID_ERRORS{gpu="0" 13\n',  # cut off
        "x" * (4 * 1024 * 1024 + 1),
    ],
)
def test_metrics_that_do_not_read_are_an_error_never_no_xid(text: str) -> None:
    with pytest.raises(ExpositionError):
        last_xids(text)
