"""Lines a stranger can cause (refusals, closings at the cap, failed accepts), at a rate nobody can turn into a flood.

Anyone on the machine can knock on a loopback port, and every such event used to be a log line: a
client in a loop rotated the log and its backups away in seconds, erasing the trail of whatever it
did before. So each kind of line writes at most BURST lines per window; past that they are counted,
and the next line of that kind, or the bridge's stop, says how many were suppressed. A kind that
fills its burst window after window gets a window twice as long each time (up to MAX_WINDOW), so a
flood that never ends costs the log a few lines an hour, not a few a minute. Kinds are bounded too:
past MAX_KINDS, lines share one "other" kind. These lines go to the log file only, never also to the
console.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..log import REFUSAL_MARK, one_line

BURST = 20
WINDOW = 60.0
MAX_WINDOW = 3600.0
MAX_KINDS = 64
OTHER = "other lines a client can cause"


@dataclass
class _Kind:
    start: float
    window: float
    written: int = 0
    suppressed: int = 0


class RefusalLog:
    """Rate-limited lines, per kind; thread-safe (the GUI's connection threads share it)."""

    def __init__(self, burst: int = BURST, window: float = WINDOW, clock: Callable[[], float] = time.monotonic) -> None:
        self._burst, self._window, self._clock = burst, window, clock
        self._lock = threading.Lock()
        self._kinds: dict[str, _Kind] = {}

    def refused(self, logger: logging.Logger, what: str, reason: str, port: int | str = "?") -> None:
        reason = one_line(reason)
        self.say(logger, f"refusals of {what} ({reason})", f"refused {what} from peer port {port}: {reason}")

    def say(
        self,
        logger: logging.Logger,
        kind: str,
        line: str,
        exc_info: BaseException | None = None,
        level: int = logging.WARNING,
    ) -> None:
        """Write `line` unless its kind (what the suppressed count calls it) has had its burst in this window."""
        now = self._clock()
        with self._lock:
            if kind not in self._kinds and len(self._kinds) >= MAX_KINDS:
                self._forget_quiet_kinds(now)
                if len(self._kinds) >= MAX_KINDS:
                    kind, line, exc_info = OTHER, f"{OTHER}: {line}", None
            entry = self._kinds.get(kind)
            summary = None
            if entry is None:
                entry = self._kinds[kind] = _Kind(now, self._window)
            elif now - entry.start >= entry.window:
                if entry.suppressed:
                    summary = f"{entry.suppressed} more {kind} were suppressed"
                # A kind that overflowed its window is a flood still going on: make the next window longer.
                window = min(MAX_WINDOW, entry.window * 2) if entry.suppressed else self._window
                entry = self._kinds[kind] = _Kind(now, window)
            if entry.written >= self._burst:
                entry.suppressed += 1
                return
            entry.written += 1
        if summary:
            _emit(logger, summary)
        _emit(logger, line, exc_info, level)

    def flush(self, logger: logging.Logger) -> None:
        """Write the counts still pending (at stop): the log must say how much was not shown."""
        with self._lock:
            pending = [(kind, entry.suppressed) for kind, entry in self._kinds.items() if entry.suppressed]
            self._kinds.clear()
        for kind, suppressed in pending:
            _emit(logger, f"{suppressed} more {kind} were suppressed")

    def _forget_quiet_kinds(self, now: float) -> None:
        """Kinds whose window has passed with nothing suppressed owe the log nothing."""
        for kind in [k for k, e in self._kinds.items() if not e.suppressed and now - e.start >= e.window]:
            del self._kinds[kind]


def _emit(
    logger: logging.Logger, message: str, exc_info: BaseException | None = None, level: int = logging.WARNING
) -> None:
    logger.log(level, "%s", message, exc_info=exc_info, extra={REFUSAL_MARK: True})


refusals = RefusalLog()
"""The process's one log of lines a client can cause, shared by both listeners."""


def refused(logger: logging.Logger, what: str, reason: str, port: int | str = "?") -> None:
    refusals.refused(logger, what, reason, port)
