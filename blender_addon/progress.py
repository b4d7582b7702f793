"""What a running job says about itself, for a client that asked to hear it.

The job only records (Blender's main thread: a tool, a render handler, a script's `progress()`);
the thread that looks after the client while the job runs reads the record and sends it
(`net/event_stream.py`). Recording is two assignments under a lock, so a render handler may
call it at any rate: the client hears the latest word at each look, never a backlog.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Said:
    """The latest word of a job: how far it is (0..1, None when it cannot tell) and what it is doing."""

    fraction: float | None
    message: str | None
    revision: int
    """Counts the reports, so a reader can tell a new word from one it has already sent."""


class Progress:
    """The latest word of one job; written on the job's thread, read on its watcher's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._said = Said(None, None, 0)

    def report(self, fraction: float | None = None, message: str | None = None) -> None:
        """Record how far the job is; a fraction that is not a number from 0 to 1 is refused (ValueError)."""
        if fraction is not None:
            if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
                raise ValueError(f"progress takes a fraction from 0 to 1, not {fraction!r}")
            if math.isnan(fraction):
                raise ValueError("progress takes a fraction from 0 to 1, not nan")
        if message is not None and not isinstance(message, str):
            raise ValueError(f"a progress message is text, not {type(message).__name__}")
        with self._lock:
            said = self._said
            kept = said.fraction if fraction is None else float(fraction)
            self._said = Said(kept, message if message is not None else said.message, said.revision + 1)

    def said(self) -> Said:
        with self._lock:
            return self._said


_current: Progress | None = None
"""The running job's record, if its client asked for progress (one job runs at a time, on the main thread)."""


@contextlib.contextmanager
def reporting(progress: Progress | None) -> Iterator[None]:
    """While inside, `report` goes to `progress` (nowhere when it is None)."""
    global _current
    previous, _current = _current, progress
    try:
        yield
    finally:
        _current = previous


def report(fraction: float | None = None, message: str | None = None) -> None:
    """Tell the running job's client how far it is, if it asked; otherwise nothing. Same checks either way."""
    (_current or _DISCARDED).report(fraction, message)


_DISCARDED = Progress()
"""Where reports go when nobody listens: they are still checked, so a script's mistake shows without a client."""
