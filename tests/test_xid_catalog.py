"""NVIDIA's Xid catalog as remedy holds it: every published code, NVIDIA's bucket → remedy's
action, where each code applies per architecture, and `remedy xid explain`."""

from __future__ import annotations

import json
from pathlib import Path

import pynvml
import pytest
from typer.testing import CliRunner

from remedy.core.models import Severity
from remedy.core.yaml_source import MAX_BYTES
from remedy.xid import load_catalog
from remedy.xid.actions import SEVERITY, XidAction
from remedy.xid.catalog import UNKNOWN_CLASS, CatalogError, Decoder, Family, family_of
from workers.cli import app

CATALOG = load_catalog()
# NVIDIA's plain immediate buckets and the action each one is in remedy's words.
PLAIN = {
    "RESTART_APP": XidAction.RESTART_APP,
    "IGNORE": XidAction.IGNORE,
    "RESET_GPU": XidAction.RESET_GPU,
    "RESTART_BM": XidAction.REBOOT,
    "RESTART_VM": XidAction.RESTART_VM,
    "CONTACT_SUPPORT": XidAction.CONTACT_SUPPORT,
    "CHECK_MECHANICALS": XidAction.CHECK_MECHANICALS,
    "UPDATE_SWFW": XidAction.UPDATE_SOFTWARE,
}
VOLTA, AMPERE, ADA = (
    pynvml.NVML_DEVICE_ARCH_VOLTA,
    pynvml.NVML_DEVICE_ARCH_AMPERE,
    pynvml.NVML_DEVICE_ARCH_ADA,
)
HOPPER, BLACKWELL = pynvml.NVML_DEVICE_ARCH_HOPPER, pynvml.NVML_DEVICE_ARCH_BLACKWELL


def test_every_code_nvidia_publishes_is_there_with_an_action() -> None:
    assert CATALOG.codes() == list(range(1, 173))  # NVIDIA's catalog: 172 codes
    for code in CATALOG.codes():
        info = CATALOG.lookup(code)
        assert info.code == code and info.mnemonic and info.description
        assert isinstance(info.action, XidAction)
        assert set(info.products) <= {"A100", "H100", "B100", "GB200"}


@pytest.mark.parametrize("code", CATALOG.codes())
def test_nvidias_plain_bucket_is_remedys_action(code: int) -> None:
    info = CATALOG.lookup(code)
    if info.bucket in PLAIN:
        assert info.action is PLAIN[info.bucket], (code, info.bucket)
    else:  # a workflow, a condition or a blank: remedy chose, and says why
        assert info.note, (code, info.bucket)
    assert info.severity is SEVERITY[info.action]


def test_remedys_choices_where_nvidia_leaves_a_workflow_or_a_blank() -> None:
    chosen = {code: CATALOG.lookup(code).action for code in (45, 48, 74, 144, 150, 154, 159)}
    assert chosen == {
        45: XidAction.RESTART_FABRIC_MANAGER,  # solo; "caused by previous Xid N" → ignore
        48: XidAction.RESET_GPU,
        74: XidAction.RESET_GPU,  # the payload decides; this is the undecodable fallback
        144: XidAction.CONTACT_SUPPORT,
        150: XidAction.CONTACT_SUPPORT,
        154: XidAction.CONTACT_SUPPORT,
        159: XidAction.RESET_GPU,  # CHECK_UVM: remedy cannot tell, so it recovers the GPU
    }
    for code in range(162, 173):
        assert CATALOG.lookup(code).bucket == ""
    assert CATALOG.lookup(171).action is CATALOG.lookup(172).action is XidAction.RESET_GPU
    assert CATALOG.lookup(163).action is XidAction.IGNORE  # "No GPU reset required"
    assert CATALOG.lookup(167).action is XidAction.CONTACT_SUPPORT


def test_decoders_are_named_for_the_codes_whose_message_decides() -> None:
    decoded = {c: CATALOG.lookup(c).decode for c in CATALOG.codes()}
    assert {c: d for c, d in decoded.items() if d is not Decoder.NONE} == {
        45: Decoder.XID45,
        74: Decoder.NVLINK74,
        154: Decoder.XID154,
        **{c: Decoder.NVLINK5 for c in range(144, 151)},
    }


def test_application_codes_stay_the_applications() -> None:
    # Copy engines, NVDEC/NVJPG/OFA and push-buffer faults: the job guard counts them as the job's.
    for code in (13, 31, 39, 68, 82, 96, 126, 139, 11, 25):
        info = CATALOG.lookup(code)
        assert (info.fault_class, info.action) == ("application", XidAction.RESTART_APP), code


def test_architecture_families_follow_nvml() -> None:
    assert family_of(VOLTA) is family_of(pynvml.NVML_DEVICE_ARCH_TURING) is Family.BEFORE_AMPERE
    assert family_of(AMPERE) is family_of(ADA) is Family.AMPERE
    assert family_of(HOPPER) is Family.HOPPER
    assert family_of(BLACKWELL) is family_of(pynvml.NVML_DEVICE_ARCH_RUBIN) is Family.BLACKWELL
    assert family_of(None) is family_of(pynvml.NVML_DEVICE_ARCH_UNKNOWN) is None


def test_where_a_code_applies_per_architecture() -> None:
    assert (CATALOG.applies_to(74, HOPPER), CATALOG.applies_to(74, BLACKWELL)) == (True, False)
    assert CATALOG.applies_to(74, ADA) is True  # Ada reads the A100 column
    assert CATALOG.lookup(121).products == ["GB200"]
    assert [CATALOG.applies_to(121, a) for a in (AMPERE, HOPPER, BLACKWELL)] == [
        False,
        False,
        True,
    ]
    assert CATALOG.applies_to(146, BLACKWELL) and not CATALOG.applies_to(146, HOPPER)
    # NVIDIA's catalog says nothing before Ampere, for an unknown architecture or code.
    assert CATALOG.applies_to(48, VOLTA) is None
    assert CATALOG.applies_to(48, None) is None
    assert CATALOG.applies_to(999, HOPPER) is None


def test_before_ampere_63_and_64_are_page_retirement() -> None:
    for code in (63, 64):
        old, new = CATALOG.lookup(code, VOLTA), CATALOG.lookup(code, AMPERE)
        assert "page retirement" in old.description and "remapping" in new.description
        assert old.mnemonic.startswith("INFOROM_PAGE_RETIREMENT")
        assert old.action is new.action and old.severity is new.severity
    assert CATALOG.lookup(63, VOLTA).action is XidAction.IGNORE
    assert CATALOG.lookup(64, VOLTA).action is XidAction.RESET_GPU
    assert CATALOG.lookup(79, VOLTA) == CATALOG.lookup(79, HOPPER)


def test_blackwell_64_comes_after_channel_repair() -> None:
    blackwell = CATALOG.lookup(64, BLACKWELL)
    assert "channel repair" in blackwell.description
    assert "channel repair" not in CATALOG.lookup(64, HOPPER).description
    assert blackwell.action is XidAction.RESET_GPU


def test_an_unknown_code_is_a_hardware_fault_for_a_person() -> None:
    info = CATALOG.lookup(176, HOPPER)  # the driver knows 173–176; this catalog does not
    assert (info.action, info.severity, info.fault_class) == (
        XidAction.CONTACT_SUPPORT,
        Severity.CRITICAL,
        UNKNOWN_CLASS,
    )


def test_the_catalog_names_its_source_and_fits_the_bounded_reader() -> None:
    source = CATALOG.source
    assert source.url == "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
    assert "2025-09-30" in source.version and "NVSentinel" in source.copy_read
    shipped = Path(__file__).parents[1] / "remedy" / "xid" / "catalog.yaml"
    assert shipped.stat().st_size < MAX_BYTES // 2


def catalog_file(tmp_path: Path, architectures: str) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(
        "source: {title: t, url: u, version: v}\n"
        "codes:\n"
        "  48: {action: reset_gpu, class: memory, mnemonic: M, description: D}\n"
        f"architectures:\n{architectures}"
    )
    return path


def test_an_override_with_a_new_action_brings_its_severity(tmp_path: Path) -> None:
    catalog = load_catalog(catalog_file(tmp_path, "  hopper:\n    48: {action: ignore}\n"))
    assert catalog.lookup(48, HOPPER).severity is Severity.INFO
    assert catalog.lookup(48, BLACKWELL).severity is Severity.CRITICAL


def test_an_override_for_a_code_not_in_the_catalog_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="49: not in codes"):
        load_catalog(catalog_file(tmp_path, "  hopper:\n    49: {action: ignore}\n"))
    with pytest.raises(CatalogError, match="rubin"):
        load_catalog(catalog_file(tmp_path, "  rubin:\n    48: {action: ignore}\n"))


def explain(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["xid", "explain", *args])
    return result.exit_code, result.output


def test_explain_prints_nvidias_entry_and_remedys_action() -> None:
    code, out = explain("48")
    assert code == 0
    assert "Xid 48  ROBUST_CHANNEL_GPU_ECC_DBE" in out
    assert "NVIDIA:        Double Bit ECC Error" in out
    assert "immediate:     WORKFLOW_XID_48 → remedy: reset_gpu (critical)" in out
    assert "investigatory: WORKFLOW_XID_48" in out
    assert "products:      A100, H100, B100, GB200" in out
    assert "note:          WORKFLOW_XID_48: solo → RESET_GPU" in out
    assert "2025-09-30" in out and "analyzing-xid-catalog.html" in out


def test_explain_says_where_a_code_applies_and_what_decodes_it() -> None:
    _, out = explain("74")
    assert (
        "applies:       before_ampere: not covered; ampere: yes; hopper: yes; blackwell: no" in out
    )
    assert "decode:        the message decides (nvlink74)" in out
    _, out = explain("64", "--architecture", str(BLACKWELL))
    assert "(as on blackwell)" in out and "channel repair" in out


def test_explain_an_unknown_code_says_so_and_exits_1() -> None:
    code, out = explain("999")
    assert code == 1
    assert "Xid 999: not in NVIDIA's catalog" in out
    assert "remedy:        contact_support (critical)" in out


def test_explain_json() -> None:
    code, out = explain("154", "--json")
    got = json.loads(out)
    assert code == 0
    assert (got["bucket"], got["action"], got["decode"], got["class"]) == (
        "XID_154",
        "contact_support",
        "xid154",
        "recovery_action",
    )
    assert got["applies"] == {
        "before_ampere": None,
        "ampere": True,
        "hopper": True,
        "blackwell": True,
    }
    assert got["source"]["url"].endswith("analyzing-xid-catalog.html")
    code, out = explain("999", "--json")
    assert code == 1 and json.loads(out)["known"] is False
