"""Xid errors: the catalog per GPU generation and the kernel-log parser."""

from remedy.xid.catalog import XidCatalog, XidInfo, load_catalog
from remedy.xid.kernel_log import XidEvent, parse_kernel_log

__all__ = ["XidCatalog", "XidEvent", "XidInfo", "load_catalog", "parse_kernel_log"]
