"""NVIDIA's Xid catalog: what each code means, on which GPUs, and what remedy does first.

``catalog.yaml`` holds every code of NVIDIA's published catalog (Ampere and newer) with
NVIDIA's buckets verbatim and the ``XidAction`` remedy takes; what differs per architecture
family is data there too (``architectures:``), applied here over the code's entry.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from remedy.core.models import Severity
from remedy.core.yaml_source import YamlSyntaxError, dotted, read_yaml
from remedy.xid.actions import SEVERITY, XidAction

CATALOG_FILE = Path(__file__).with_name("catalog.yaml")
UNKNOWN_CLASS = "unknown_hardware_fault"


class Decoder(StrEnum):
    """Which decoder reads the Xid's message for the action (remedy/xid/decode.py)."""

    NONE = "none"
    XID154 = "xid154"  # "GPU recovery action changed from 0x%x (%s) to 0x%x (%s)"
    NVLINK74 = "nvlink74"  # NVLink register payload (WORKFLOW_NVLINK_ERR)
    NVLINK5 = "nvlink5"  # 144–150: IntrInfo + ErrorStatus (WORKFLOW_NVLINK5_ERR)
    XID45 = "xid45"  # solo or "caused by previous Xid N" (WORKFLOW_XID_45)


class Family(StrEnum):
    """Architecture families, as NVIDIA's catalog tells GPUs apart."""

    BEFORE_AMPERE = "before_ampere"  # not in the catalog: NVIDIA keeps an older one
    AMPERE = "ampere"  # the A100 column; Ada too
    HOPPER = "hopper"  # the H100 column
    BLACKWELL = "blackwell"  # the B100 and GB200 columns; and newer architectures


# The catalog's product columns each family reads (the catalog has no other products).
PRODUCTS: dict[Family, tuple[str, ...]] = {
    Family.BEFORE_AMPERE: (),
    Family.AMPERE: ("A100",),
    Family.HOPPER: ("H100",),
    Family.BLACKWELL: ("B100", "GB200"),
}

# pynvml's NVML_DEVICE_ARCH_* values (tests check them against pynvml).
_AMPERE, _ADA, _HOPPER = 7, 8, 9
_ARCH_UNKNOWN = 0xFFFFFFFF


def family_of(architecture: int | None) -> Family | None:
    """The family of an ``nvmlDeviceGetArchitecture`` value; None when unknown. Anything past
    Hopper reads as Blackwell: a new GPU is closest to the newest columns NVIDIA published."""
    if architecture is None or architecture <= 0 or architecture == _ARCH_UNKNOWN:
        return None
    if architecture < _AMPERE:
        return Family.BEFORE_AMPERE
    if architecture in (_AMPERE, _ADA):
        return Family.AMPERE
    if architecture == _HOPPER:
        return Family.HOPPER
    return Family.BLACKWELL


class XidInfo(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    code: int
    mnemonic: str
    description: str  # NVIDIA's
    action: XidAction  # remedy's immediate action when nothing in the message decides
    bucket: str = ""  # NVIDIA's immediate bucket, verbatim ("" where NVIDIA leaves it blank)
    investigate: str = ""  # NVIDIA's investigatory bucket, verbatim
    products: list[str] = []  # where NVIDIA says the code applies (A100, H100, B100, GB200)
    fault_class: str = Field(alias="class")
    severity: Severity  # SEVERITY[action] unless the catalog says otherwise
    decode: Decoder = Decoder.NONE
    note: str = ""  # why remedy's action differs from, or fills a blank in, NVIDIA's

    @model_validator(mode="before")
    @classmethod
    def _severity_from_action(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("severity") is None and "action" in data:
            try:
                return {**data, "severity": SEVERITY[XidAction(data["action"])]}
            except ValueError:
                return data  # the action's own error says what is wrong
        return data

    def severity_for(self, action: XidAction) -> Severity:
        """How much an Xid of this code matters when its action is ``action``: the catalog's
        own severity for its own action (it may raise it), else the action's."""
        return self.severity if action == self.action else SEVERITY[action]


class CatalogSource(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str
    url: str
    version: str
    copy_read: str = Field(default="", alias="copy")


def unknown(code: int) -> XidInfo:
    """A code the catalog does not list: a hardware fault a person must look at, never healthy."""
    return XidInfo.model_validate(
        {
            "code": code,
            "mnemonic": "UNKNOWN",
            "description": "unknown Xid: treat as a hardware fault",
            "action": XidAction.CONTACT_SUPPORT,
            "class": UNKNOWN_CLASS,
            "note": "not in this version of NVIDIA's catalog",
        }
    )


class XidCatalog:
    def __init__(
        self,
        source: CatalogSource,
        codes: dict[int, XidInfo],
        overrides: dict[Family, dict[int, XidInfo]] | None = None,
    ) -> None:
        self.source = source
        self._codes = codes
        self._overrides = overrides or {}

    def codes(self) -> list[int]:
        return sorted(self._codes)

    def lookup(self, code: int, architecture: int | None = None) -> XidInfo:
        """The entry for ``code`` as it reads on ``architecture`` (NVML's value; None: the
        catalog's own, Ampere and newer)."""
        family = family_of(architecture)
        if family is not None and code in self._overrides.get(family, {}):
            return self._overrides[family][code]
        return self._codes.get(code) or unknown(code)

    def applies_to(self, code: int, architecture: int | None) -> bool | None:
        """Whether NVIDIA lists ``code`` for GPUs of ``architecture``; None when NVIDIA says
        nothing (an unknown code or architecture, or one before Ampere)."""
        family = family_of(architecture)
        return None if family is None else self.applies_in(code, family)

    def applies_in(self, code: int, family: Family) -> bool | None:
        """True when any of the family's product columns says YES (an architecture alone
        cannot tell B100 from GB200); None for an unknown code or before Ampere."""
        info = self._codes.get(code)
        if info is None or family is Family.BEFORE_AMPERE:
            return None
        return any(p in info.products for p in PRODUCTS[family])


class CatalogError(ValueError):
    pass


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: CatalogSource
    codes: dict[int, dict[str, Any]]
    architectures: dict[Family, dict[int, dict[str, Any]]] = {}


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
        raise CatalogError(f"{path}:{line}: {dotted(at)}: duplicate key")
    try:
        raw = _File.model_validate(doc.data)
        codes = {c: XidInfo.model_validate({**e, "code": c}) for c, e in raw.codes.items()}
        overrides = {
            family: {c: _override(codes, c, e) for c, e in table.items()}
            for family, table in raw.architectures.items()
        }
    except (ValidationError, CatalogError) as exc:
        raise CatalogError(f"{path}: {exc}") from None
    return XidCatalog(raw.source, codes, overrides)


def _override(codes: dict[int, XidInfo], code: int, fields: dict[str, Any]) -> XidInfo:
    """The code's entry with the family's fields in place (validated as a whole entry)."""
    if code not in codes:
        raise CatalogError(f"architectures: {code}: not in codes")
    base = codes[code].model_dump(by_alias=True, exclude={"severity"})
    if "action" not in fields:  # a new action brings its own severity
        base["severity"] = codes[code].severity
    return XidInfo.model_validate({**base, **fields, "code": code})
