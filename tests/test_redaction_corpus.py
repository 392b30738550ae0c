"""The secret corpus (tests/data/secret-corpus.yaml): every real-looking secret is hidden behind
its kind's marker, and the ordinary text beside it is left alone. A miss found in the field
becomes a case there first."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from remedy.redaction import Redactor

CORPUS = Path(__file__).resolve().parent / "data" / "secret-corpus.yaml"


class Case(BaseModel):
    kind: str
    secret: str
    text: str


def corpus() -> tuple[list[Case], list[str]]:
    raw = yaml.safe_load(CORPUS.read_text())
    return [Case(**c) for c in raw["secrets"]], list(raw["ordinary"])


SECRETS, ORDINARY = corpus()


@pytest.mark.parametrize("case", SECRETS, ids=[f"{c.kind}:{c.secret[:12]}" for c in SECRETS])
def test_each_secret_is_hidden_behind_its_kind(case: Case) -> None:
    assert case.secret in case.text  # the case is well formed
    out = Redactor().text(case.text)
    assert case.secret not in out
    assert f"[REDACTED:{case.kind}]" in out
    assert Redactor().text(out) == out


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor().text(text) == text
