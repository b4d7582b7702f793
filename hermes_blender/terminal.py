"""Text for a terminal, from sources we do not control.

Object names come from a .blend anyone could have made, and the runtime file from any process
of this user. Printed raw, a name could end a line and forge a "ready" verdict, or carry escape
sequences that retitle the terminal or move the cursor, or bidirectional controls (U+202E) that
show a line in another order than it is. Every such character is shown as a visible escape instead.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, TextIO

_FORMAT = "\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
"""Invisible format characters: bidirectional embeddings, overrides and isolates, zero-width marks."""
_SURROGATES = "\ud800-\udfff"
"""A name that is not UTF-8 on disk, as Python reads it: a terminal's UTF-8 stream cannot print one at all."""
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_FORMAT}{_SURROGATES}]")
_CONTROL_OR_LINE_BREAK = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{_FORMAT}{_SURROGATES}]")


def _escape(found: re.Match[str]) -> str:
    return f"\\x{ord(found.group()):02x}" if ord(found.group()) < 0x100 else f"\\u{ord(found.group()):04x}"


def one_line(value: object) -> str:
    """A value inside a line (a name, a detail): no line breaks, no control characters."""
    return _CONTROL_OR_LINE_BREAK.sub(_escape, str(value))


def printable(text: str) -> str:
    """Whole output we composed: its own line breaks and tabs stay, every other control character is escaped."""
    return _CONTROL.sub(_escape, text)


WAITING_AFTER = 2.0
"""Seconds without an answer or a word of progress before a call on a terminal says that it waits."""


class ProgressBar:
    """A call's progress on a terminal (stderr), one line redrawn in place: `[#####-----]  50% frame 2 of 4`.

    The bridge's `progress` counts seconds and its `total` is the seconds the whole should take, so their ratio is
    how far the work says it is; with no `total` yet, the bar shows the seconds and the latest word."""

    WIDTH = 24

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._drawn = False
        self._waiting = False
        """The waiting line is on the terminal (its line ends at close, as the bar's does)."""

    async def heard(self, params: dict[str, Any]) -> None:
        seconds = params.get("progress")
        total = params.get("total")
        message = printable(str(params.get("message") or ""))[:60]
        if isinstance(total, (int, float)) and total > 0 and isinstance(seconds, (int, float)):
            fraction = max(0.0, min(1.0, seconds / total))
            filled = round(fraction * self.WIDTH)
            line = f"[{'#' * filled}{'-' * (self.WIDTH - filled)}] {fraction:>4.0%} {message}"
        else:
            line = f"[{'.' * self.WIDTH}] {seconds or 0:>4.0f}s {message}"
        self._stream.write("\r\x1b[2K" + line)
        self._stream.flush()
        self._drawn = True

    async def unanswered(self, after: float = WAITING_AFTER) -> None:
        """Until cancelled: after `after` seconds with no answer and no word of progress, say each second that the
        call waits (a Blender runs one call at a time: another client's may hold it), so silence is never a hang."""
        await asyncio.sleep(after)
        waited = after
        while not self._drawn:
            self._stream.write(
                f"\r\x1b[2Kwaiting for Blender: no answer for {waited:.0f} s (it runs one call at a time; another "
                "client's call may be running)"
            )
            self._stream.flush()
            self._waiting = True
            await asyncio.sleep(1.0)
            waited += 1.0
        # the bar's own line (progress) takes over from here

    def close(self) -> None:
        """End the bar's line, so what follows starts on a line of its own."""
        if self._drawn or self._waiting:
            self._stream.write("\n")
            self._stream.flush()
