"""Lone surrogates as U+FFFD, in what the toolkit hands an MCP client.

Python reads a path that is not UTF-8 on disk (a Latin-1 home on Linux) with surrogateescape: each undecodable
byte becomes a lone surrogate. The official SDK cannot write one (pydantic: "surrogates not allowed"), so the stdio
relay ended on it, and its parser refuses one escaped in JSON. The bridge answers such text with U+FFFD, as Blender
shows an undecodable name; the relay does the same with what it says itself and with what it passes on (an older
add-on, or a record any process of the user could write).
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
ESCAPED = ("\\ud", "\\uD")
"""How a surrogate looks escaped in JSON text: only text holding one can parse to a lone surrogate."""


def well_formed(text: str) -> str:
    """`text` with each lone surrogate as U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def well_formed_in(value: Any) -> Any:
    """`value` (parsed JSON) with every string, keys included, `well_formed`."""
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, dict):
        return {well_formed(key): well_formed_in(item) for key, item in value.items()}
    if isinstance(value, list):
        return [well_formed_in(item) for item in value]
    return value


def loads(body: bytes) -> Any:
    """A JSON body parsed, each lone surrogate in it as U+FFFD. Decoded as UTF-8 here (bytes that are not, a
    surrogate's UTF-8 form included, as U+FFFD; `json.loads` of bytes would keep them), so only an escape can
    still give one: the value is walked only when the text holds one."""
    text = body.decode("utf-8", errors="replace")
    try:
        value = json.loads(text)
    except RecursionError:  # nested deeper than Python's parser goes: not JSON any bridge sends
        raise ValueError("JSON nested too deeply") from None
    return well_formed_in(value) if any(escape in text for escape in ESCAPED) else value
