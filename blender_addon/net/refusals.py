"""Lines a stranger can cause (refusals, closings at the cap, failed accepts), at a rate nobody can turn into a flood.

Anyone on the machine can knock on a loopback port, and every such event used to be a log line: a
client in a loop rotated the log and its backups away in seconds, erasing the trail of whatever it
did before. So each kind of line writes at most BURST lines per window; past that they are counted,
and the next line of that kind, or the bridge's stop, says how many were suppressed. A kind that
fills its burst window after window gets a window twice as long each time (up to MAX_WINDOW), so a
flood that never ends costs the log a few lines an hour, not a few a minute. All kinds together share
one budget the same way (TOTAL_BURST a window, doubling while it overflows): a client that keeps each of a
dozen kinds just under its own burst would otherwise write hundreds of lines a minute for ever. Kinds are
bounded too: past MAX_KINDS, lines share one "other" kind. These lines go to the log file only, never
also to the console.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..log import REFUSAL_MARK, one_line

BURST = 20
TOTAL_BURST = 60
"""Lines of all kinds together in one window."""
WINDOW = 60.0
MAX_WINDOW = 3600.0
MAX_KINDS = 64
OTHER = "other lines a client can cause"


class _Kind:
    """One kind of refusal's window: lines written in it, and those held back."""

    __slots__ = ("start", "window", "written", "suppressed")

    def __init__(self, start: float, window: float) -> None:
        self.start = start
        self.window = window
        self.written = 0
        self.suppressed = 0


class RefusalLog:
    """Rate-limited lines, per kind; thread-safe (the GUI's connection threads share it)."""

    def __init__(
        self,
        burst: int = BURST,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
        total_burst: int = TOTAL_BURST,
    ) -> None:
        self._burst, self._window, self._clock, self._total_burst = burst, window, clock, total_burst
        self._lock = threading.Lock()
        self._kinds: dict[str, _Kind] = {}
        self._total = _Kind(clock(), window)

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
                entry = self._kinds[kind] = self._next_window(entry, now)
            if now - self._total.start >= self._total.window:
                self._total = self._next_window(self._total, now)
            if entry.written >= self._burst or self._total.written >= self._total_burst:
                entry.suppressed += 1
                self._total.suppressed += 1
                return
            entry.written += 1
            self._total.written += 1
        if summary:
            _emit(logger, summary)
        _emit(logger, line, exc_info, level)

    def flush(self, logger: logging.Logger) -> None:
        """Write the counts still pending (at stop): the log must say how much was not shown. The next bridge
        starts with every budget whole."""
        with self._lock:
            pending = [(kind, entry.suppressed) for kind, entry in self._kinds.items() if entry.suppressed]
            self._kinds.clear()
            self._total = _Kind(self._clock(), self._window)
        for kind, suppressed in pending:
            _emit(logger, f"{suppressed} more {kind} were suppressed")

    def _next_window(self, ended: _Kind, now: float) -> _Kind:
        """One that overflowed is a flood still going on: the next window is twice as long (up to MAX_WINDOW)."""
        return _Kind(now, min(MAX_WINDOW, ended.window * 2) if ended.suppressed else self._window)

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
