"""Whom a request's work runs for: what the network side hands the job side with each request.

net/ declares this and the job side (dispatch, execution) takes it: the request's side says whether
its client still wants the answer and sends what the job says of itself, and the job only records
(`Progress`, two assignments under a lock, so a render handler may report at any rate: the client
hears the latest word at each look, never a backlog).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable


class Said:
    """The latest word of a job: how far it is (0..1, None when it cannot tell) and what it is doing."""

    __slots__ = ("fraction", "message", "revision")

    def __init__(self, fraction: float | None, message: str | None, revision: int) -> None:
        self.fraction = fraction
        self.message = message
        self.revision = revision
        """Counts the reports, so a reader can tell a new word from one it has already sent."""


class Progress:
    """The latest word of one job; written on the job's thread, read on its watcher's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._said = Said(None, None, 0)

    def report(self, fraction: float | None = None, message: str | None = None) -> None:
        """Record how far the job is; a fraction that is not a number from 0 to 1 is refused (ValueError). A report
        without a fraction or a message keeps the last one."""
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


def _always() -> bool:
    return True


def _nothing(now: float) -> None:
    pass


class ClientInput:
    """A 2026-07-28 client that can put a question to its user (it declares `elicitation`), and what it brings back
    when it calls again: its user's answers (`inputResponses`) and the state the bridge gave it (`requestState`)."""

    __slots__ = ("responses", "state")

    def __init__(self, responses: object = None, state: object = None) -> None:
        self.responses = responses if isinstance(responses, dict) else None
        self.state = state if isinstance(state, str) else None


class Caller:
    """Whom a job runs for, as the job's watcher sees them.

    `conversation` is the client's conversation (its session, or the one it names), when it has one, and
    `client_input` what it can ask its user; `wanted` is
    asked before the job starts (False: dropped unrun) and at each look while it runs
    (False: stopped, the hang-up being the cancel signal); `tend` is called at each look, off the
    job's thread, with the time (it sends the client what `progress` says); `progress` is where the
    job records how far it is, when the client asked to hear it.
    """

    __slots__ = ("wanted", "tend", "progress", "conversation", "client_input")

    def __init__(
        self,
        wanted: Callable[[], bool] = _always,
        tend: Callable[[float], None] = _nothing,
        progress: Progress | None = None,
        conversation: str | None = None,
        client_input: ClientInput | None = None,
    ) -> None:
        self.wanted = wanted
        self.tend = tend
        self.progress = progress
        self.conversation = conversation
        self.client_input = client_input
        """None: the client cannot ask its user (the question, if any, is asked in Blender)."""


ANYONE = Caller()
"""A caller that always waits for the answer and hears nothing meanwhile."""
