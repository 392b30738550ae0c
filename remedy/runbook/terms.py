"""The JSON Schema of a runbook's terms (a check, a reason, an NVIDIA action): the registry's
names with what they mean, so an editor completes and checks them."""

from __future__ import annotations

from pydantic import GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from remedy.detection import vocabulary


class Terms:
    """The JSON Schema of a check, a reason or an NVIDIA action: the registry's names with what
    they mean, so an editor completes and checks them."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        if self.kind == "check":
            return _one_of({t.check: t.says for t in vocabulary.TERMS})
        if self.kind == "nvidia_action":
            return _one_of(dict(vocabulary.NVIDIA_ACTIONS))
        return {
            "anyOf": [
                _one_of(vocabulary.reasons()),
                {"type": "string", "pattern": vocabulary.XID_REASON.pattern},
            ]
        }


def _one_of(names: dict[str, str]) -> JsonSchemaValue:
    return {"oneOf": [{"const": n, "description": says} for n, says in sorted(names.items())]}
