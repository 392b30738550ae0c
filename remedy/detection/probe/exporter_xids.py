"""The probe's dcgm-exporter check: the exporter's Xid gauge (``DCGM_FI_DEV_XID_ERRORS``, read
by ``remedy.detection.dcgm_exporter``) where the agent is given its URL (``--dcgm-exporter``),
with its terms and its seam (``adapters.host.dcgm_health`` fetches the metrics).

The gauge holds each GPU's last Xid, not a count. The probe keeps the last reading across its
probes (``dcgm_sources.ExporterReadings``) and reports the GPUs whose last Xid changed to a
code as Xid findings on that GPU, found by its UUID. What this cannot say, and the kernel log
can: when the Xid happened (the finding's time is the probe's), and a repeat of the same code
(the gauge does not move). The kernel-log reader stays the authority; this is for nodes whose
kernel log remedy cannot read. The first reading after the agent starts reports every GPU
whose gauge holds a code: it raised that Xid at some time since the exporter started.
"""

from __future__ import annotations

from remedy.core.models import Component, ComponentKind, Finding, Severity
from remedy.detection.check_terms import CheckTerms
from remedy.detection.dcgm_exporter import XID_METRIC, ExpositionError, LastXid, last_xids
from remedy.detection.probe.context import CheckContext
from remedy.detection.probe.dcgm_sources import MetricsUnreadable
from remedy.xid.catalog import XidCatalog, load_catalog

DCGM_EXPORTER = CheckTerms(
    "dcgm_exporter",
    "dcgm-exporter's Xid gauge (DCGM_FI_DEV_XID_ERRORS), where the agent is given its URL",
    probe=True,
)
EXPORTER_UNREADABLE = DCGM_EXPORTER.reason(
    "DcgmExporterUnreadable",
    "dcgm-exporter's metrics cannot be fetched or read, or carry no Xid gauge (fail closed)",
)
XID_CHECK = "xid"  # the same check as the kernel log's and NVML's Xids: the same runbooks


def check_dcgm_exporter(ctx: CheckContext, catalog: XidCatalog | None = None) -> list[Finding]:
    assert ctx.dcgm_exporter is not None and ctx.exporter_readings is not None
    try:
        text = ctx.dcgm_exporter.fetch()
        now = last_xids(text)
    except (MetricsUnreadable, ExpositionError) as exc:
        return [_unreadable(ctx, str(exc))]  # the last reading stays: nothing is lost
    if not now:
        return [_unreadable(ctx, f"the exporter publishes no {XID_METRIC} (not in its fields?)")]
    table = catalog or load_catalog()
    return [_xid(ctx, table, x) for x in ctx.exporter_readings.changed(now)]


def _unreadable(ctx: CheckContext, why: str) -> Finding:
    return ctx.finding(
        DCGM_EXPORTER.check,
        EXPORTER_UNREADABLE,
        Severity.WARNING,
        f"cannot read dcgm-exporter's Xid gauge: {why}",
    )


def _xid(ctx: CheckContext, catalog: XidCatalog, last: LastXid) -> Finding:
    gpu = _gpu(ctx, last.gpu)
    info = catalog.lookup(last.code, gpu.architecture)
    return Finding(
        node=ctx.node,
        check=XID_CHECK,
        reason=f"Xid{last.code}",
        severity=info.severity,
        component=gpu,
        xid=last.code,
        evidence=f"{info.fault_class}: {info.description} (dcgm-exporter's {XID_METRIC} "
        "gauge changed to this code: its last Xid, seen at this probe; a repeat is not seen)",
        observed_at=ctx.now(),
        nvidia_action=info.action.value,  # a gauge carries the code alone: the catalog's action
    )


def _gpu(ctx: CheckContext, name: str) -> Component:
    """The GPU by UUID (the exporter's label), else by index where it gave no UUID."""
    known = next((g for g in ctx.gpus if g.uuid == name), None)
    if known is None and name.isdigit():
        known = next((g for g in ctx.gpus if g.index == int(name)), None)
        return known or Component(kind=ComponentKind.GPU, index=int(name))
    return known or Component(kind=ComponentKind.GPU, uuid=name)
