"""Datablocks' names as text a model can read (no bpy: a primitive the tools and the change record share)."""

from __future__ import annotations

from typing import Any


def name_of(item: Any) -> str:
    """A datablock's name. One that is not valid UTF-8 in the .blend (bpy cannot decode it) comes back
    with U+FFFD in place of the bad bytes, so one odd name never fails the answer for a whole scene."""
    try:
        return str(item.name)
    except UnicodeDecodeError as exc:
        raw = exc.object
        return bytes(raw).decode("utf-8", "replace") if isinstance(raw, bytes | bytearray) else "\ufffd"
