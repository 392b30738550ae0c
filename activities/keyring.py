"""The operator keyring from the controller: the public keys whose signed decisions (approve,
abort, clear) a ladder takes, as the controller loaded them at start (``--keyring``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contract import activities as act
from remedy.trust.signing import Keyring


class KeyringActivities:
    def __init__(self, keyring: Callable[[], Keyring]) -> None:
        self._keyring = keyring  # read at each load: a key removed stops counting

    @act.OPERATOR_KEYRING.defn
    async def operator_keyring(self) -> Keyring:
        return self._keyring()

    def all(self) -> list[Callable[..., Any]]:
        return [self.operator_keyring]
