"""One request's answer as an event stream: progress notifications while it runs, then its response.

Chosen for a `tools/call` whose `_meta.progressToken` is set by a client that accepts
`text/event-stream`; every other answer stays one `application/json` body. The stream is an
HTTP/1.1 200 with `Transfer-Encoding: chunked`, one chunk per SSE event, so the connection is
kept for the next request, as after a JSON answer.

The job records how far it is (`caller.Progress`); its watcher calls `tend` at each look (every
WATCH_INTERVAL, off the job's thread) and the stream sends what is new, or at every HEARTBEAT a
word that the job still runs, so a client that resets its timeout on progress never gives up on
a long render. The notification's `progress` is the seconds since the call began, which rise
with each one as the specification requires; `total` is the seconds the whole should take at the
rate so far, present when the job has said how far it is; `message` is its word ("frame 3 of
10") or "running for N s". A client that does not read never holds the job: what the socket does
not take now waits, and beyond PENDING_LIMIT new words are dropped until it reads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..jsontext import encode
from .caller import Progress

HEARTBEAT = 1.0
"""Seconds without news after which the client hears that the job still runs."""
PENDING_LIMIT = 64 * 1024
"""Bytes a client that does not read may leave waiting before new notifications are dropped."""
MESSAGE_CHARS = 200
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)
END = b"0\r\n\r\n"

ProgressToken = str | int
Send = Callable[[bytes], int]
"""Sends what the socket takes now without waiting and says how many bytes that was; OSError when gone."""


class EventStream:
    """The answer to one request, sent in pieces by its watcher and finished by its driver."""

    def __init__(self, token: ProgressToken, began: float, send: Send) -> None:
        self.progress = Progress()
        self._token = token
        self._began = began
        self._send = send
        self._lock = threading.Lock()
        self._pending = bytearray(HEAD)
        self._finished = False
        self._revision = 0
        self._last_progress = 0.0
        self._last_word = began

    def tend(self, now: float) -> None:
        """At each look while the job runs: the head at once, then what is new or the heartbeat."""
        with self._lock:
            if self._finished:
                return
            said = self.progress.said()
            if said.revision != self._revision or now - self._last_word >= HEARTBEAT:
                self._notify(now, said.fraction, said.message)
                self._revision = said.revision
            self._flush()

    def finish(self, message: dict[str, Any]) -> bytes:
        """The rest of the stream, ending with `message` (the JSON-RPC response); nothing is sent after it."""
        with self._lock:
            self._finished = True
            rest = bytes(self._pending) + event(encode(message)) + END
            self._pending.clear()
            return rest

    def _notify(self, now: float, fraction: float | None, message: str | None) -> None:
        elapsed = round(now - self._began, 3)
        if elapsed <= self._last_progress or len(self._pending) > PENDING_LIMIT:
            return
        params: dict[str, Any] = {"progressToken": self._token, "progress": elapsed}
        if fraction:
            total = round(elapsed / fraction, 3)
            if total >= elapsed:
                params["total"] = total
        if message is None:
            message = f"running for {elapsed:.0f} s"
        params["message"] = message[:MESSAGE_CHARS]
        self._pending += event(encode({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}))
        self._last_progress, self._last_word = elapsed, now

    def _flush(self) -> None:
        try:
            taken = self._send(bytes(self._pending))
        except OSError:
            return  # the client left; its watcher sees that and stops the job
        del self._pending[:taken]


def event(data: bytes) -> bytes:
    """One SSE `message` event as one HTTP chunk (JSON text holds no raw newline, so one data line)."""
    event = b"event: message\ndata: " + data + b"\n\n"
    return f"{len(event):X}\r\n".encode() + event + b"\r\n"
