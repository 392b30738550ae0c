"""The Xid catalog: what each code means on each GPU generation, and what to do first."""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from remedy.models import Severity
from remedy.yaml_source import YamlSyntaxError, read_yaml

CATALOG_FILE = Path(__file__).with_name("catalog.yaml")
UNKNOWN_CLASS = "unknown_hardware_fault"


class FirstAction(StrEnum):
    NONE = "none"
    RESTART_APP = "restart_app"
    RESET_GPU = "reset_gpu"
    REBOOT = "reboot"
    INSPECT = "inspect"


class Generation(StrEnum):
    BEFORE_AMPERE = "before_ampere"
    AMPERE_AND_NEWER = "ampere_and_newer"


class XidInfo(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    fault_class: str = Field(alias="class")
    action: FirstAction
    severity: Severity
    meaning: str


_UNKNOWN = XidInfo.model_validate(
    {
        "class": UNKNOWN_CLASS,
        "action": FirstAction.INSPECT,
        "severity": Severity.CRITICAL,
        "meaning": "unknown Xid: treat as a hardware fault",
    }
)

# NVML_DEVICE_ARCH_* values: Kepler 2 … Volta 5, Turing 6, Ampere 7, Ada 8, Hopper 9, Blackwell 10.
_FIRST_AMPERE_ARCH = 7


def generation_of(architecture: int | None) -> Generation:
    """Unknown architectures get the current map: new GPUs are Ampere or newer."""
    if architecture is not None and 0 < architecture < _FIRST_AMPERE_ARCH:
        return Generation.BEFORE_AMPERE
    return Generation.AMPERE_AND_NEWER


class XidCatalog:
    def __init__(self, tables: dict[Generation, dict[int, XidInfo]]) -> None:
        self._tables = tables

    def codes(self) -> list[int]:
        """Every catalogued code, on any generation."""
        return sorted({code for table in self._tables.values() for code in table})

    def lookup(self, code: int, architecture: int | None = None) -> XidInfo:
        generation = generation_of(architecture)
        if generation is Generation.BEFORE_AMPERE:
            found = self._tables[generation].get(code)
            if found:
                return found
        return self._tables[Generation.AMPERE_AND_NEWER].get(code, _UNKNOWN)


class CatalogError(ValueError):
    pass


@cache
def load_catalog(path: Path = CATALOG_FILE) -> XidCatalog:
    """The catalog, read with the runbooks' bounded reader (the same size, alias and depth
    limits); a duplicate code is an error rather than silently one of the two."""
    try:
        doc = read_yaml(path)
    except YamlSyntaxError as exc:
        raise CatalogError(f"{path}:{exc.line}: {exc}") from None
    if doc.duplicates:
        at, line = doc.duplicates[0]
        raise CatalogError(f"{path}:{line}: {'.'.join(map(str, at))}: duplicate key")
    raw = doc.data
    tables = {
        Generation(gen): {
            int(code): XidInfo.model_validate(info)
            for code, info in (raw.get(gen.value) or {}).items()
        }
        for gen in Generation
    }
    return XidCatalog(tables)
