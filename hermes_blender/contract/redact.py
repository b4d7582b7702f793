"""Secrets registered before use and scrubbed from everything we print.

Mirrors Hermes: a token found in the runtime file is registered for redaction before any
header is built from it, so no traceback or log line can carry it out.
"""

from __future__ import annotations

import threading

REDACTED = "«redacted-token»"
_MAX_SECRETS = 64


class Secret:
    """A string that never shows itself in a repr or str."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return "Secret(<hidden>)" if self._value else "Secret(<empty>)"

    __str__ = __repr__


class Redactor:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: list[str] = []

    def register(self, secret: Secret) -> None:
        value = secret.reveal()
        forms = {value, value.replace("\r", "").replace("\n", "")} - {""}
        with self._lock:
            for form in forms:
                if form in self._secrets:
                    self._secrets.remove(form)
                self._secrets.append(form)  # most recent last
            del self._secrets[:-_MAX_SECRETS]

    def redact(self, text: str) -> str:
        with self._lock:
            secrets = sorted(self._secrets, key=len, reverse=True)
        for secret in secrets:
            text = text.replace(secret, REDACTED)
        return text


REDACTOR = Redactor()
"""The process-wide registry every output path of hermes_blender goes through."""
