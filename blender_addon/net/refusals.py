"""Refusals in the log: one line each, at a rate nobody on the machine can turn into a flood.

Anyone on the machine can knock on a loopback port, and every refusal used to be a log line: a
client in a loop rotated the log and its backups away in seconds, erasing the trail of whatever
it did before. So each kind of refusal (what was refused, and why) writes at most BURST lines per
WINDOW seconds; past that they are counted, and the next line of that kind, or the bridge's stop,
says how many were suppressed. Refusals go to the log file only, never also to the console.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..log import REFUSAL_MARK, one_line

BURST = 20
WINDOW = 60.0


class RefusalLog:
    """Rate-limited refusal lines, per kind; thread-safe (the GUI's connection threads share it)."""

    def __init__(self, burst: int = BURST, window: float = WINDOW, clock: Callable[[], float] = time.monotonic) -> None:
        self._burst, self._window, self._clock = burst, window, clock
        self._lock = threading.Lock()
        self._kinds: dict[tuple[str, str], list[float | int]] = {}
        """(what, reason) -> [window start, lines written in it, lines suppressed in it]."""

    def refused(self, logger: logging.Logger, what: str, reason: str, port: int | str = "?") -> None:
        reason = one_line(reason)
        now = self._clock()
        with self._lock:
            kind = self._kinds.get((what, reason))
            if kind is None or now - kind[0] >= self._window:
                suppressed = 0 if kind is None else int(kind[2])
                if len(self._kinds) >= 4 * self._burst:  # kinds are ours, but bound them all the same
                    self._kinds.clear()
                kind = self._kinds[(what, reason)] = [now, 0, 0]
                if suppressed:
                    _emit(logger, f"{suppressed} more refusals of {what} ({reason}) were suppressed")
            if kind[1] >= self._burst:
                kind[2] += 1
                return
            kind[1] += 1
        _emit(logger, f"refused {what} from peer port {port}: {reason}")

    def flush(self, logger: logging.Logger) -> None:
        """Write the counts still pending (at stop): the log must say how much was not shown."""
        with self._lock:
            pending = [(what, reason, int(kind[2])) for (what, reason), kind in self._kinds.items() if kind[2]]
            self._kinds.clear()
        for what, reason, suppressed in pending:
            _emit(logger, f"{suppressed} more refusals of {what} ({reason}) were suppressed")


def _emit(logger: logging.Logger, message: str) -> None:
    logger.warning("%s", message, extra={REFUSAL_MARK: True})


refusals = RefusalLog()
"""The process's one refusal log, shared by both listeners."""


def refused(logger: logging.Logger, what: str, reason: str, port: int | str = "?") -> None:
    refusals.refused(logger, what, reason, port)
