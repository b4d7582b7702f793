"""`subscriptions/listen` (2026-07-28): long-lived event streams that say which resources changed.

The job side publishes the URIs a change touched (`Updates.publish`, any thread, cheap: a set update under
a lock); each stream sends `notifications/resources/updated` for the URIs its client named, coalesced: one
notification per URI per COALESCE at most, so a drag in the GUI that changes the scene sixty times a second
reaches a client four times a second, never as a flood. A stream sends its acknowledgment at once, hears a
keep-alive comment after KEEPALIVE of silence, and ends with the graceful result when the bridge stops. A
client that hangs up is seen within LOOK (its place is freed; one that ends its sending side has left too: a
stream's reader never half-closes). A client that does not read never holds anyone: what its socket does not
take waits, and beyond PENDING_LIMIT nothing more is written for it: its changed URIs wait in a set (a URI
changed again is still one), so a stream's memory is bounded whatever the scene does.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import RpcError
from ..jsontext import encode
from .event_stream import END, HEAD, PENDING_LIMIT, Send, event
from .mcp import INTERNAL_ERROR, INVALID_PARAMS

COALESCE = 0.25
"""Seconds between two notifications of one stream: at most four a second per URI."""
KEEPALIVE = 5.0
"""Seconds of silence after which a stream sends a comment, so a client that left without a word is found."""
LOOK = 0.5
"""Seconds between two looks at whether a stream's client is still there (its hang-up frees its place)."""
MAX_STREAMS = 32
"""Streams one bridge keeps open at once (each holds a thread while it lasts)."""
MAX_URIS = 256
MAX_URI_CHARS = 2048
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
KEEPALIVE_CHUNK = b"E\r\n: keep-alive\n\n\r\n"
"""An SSE comment (ignored by every reader) as one HTTP chunk: 14 bytes, hex E."""


@dataclass
class _Stream:
    """One listen stream: the URIs it asked to hear of, and those changed since it was last told."""

    wanted: frozenset[str]
    pending: set[str] = field(default_factory=set)


def resource_filter(params: dict[str, Any]) -> list[str]:
    """The URIs a `subscriptions/listen` asks to hear about (its other notification kinds are not offered)."""
    notifications = params.get("notifications", {})
    if not isinstance(notifications, dict):
        raise RpcError(INVALID_PARAMS, "subscriptions/listen 'notifications' must be an object")
    uris = notifications.get("resourceSubscriptions", [])
    if not isinstance(uris, list) or not all(isinstance(uri, str) and 0 < len(uri) <= MAX_URI_CHARS for uri in uris):
        raise RpcError(INVALID_PARAMS, f"'resourceSubscriptions' must be a list of URIs (up to {MAX_URI_CHARS} chars)")
    if len(uris) > MAX_URIS:
        raise RpcError(INVALID_PARAMS, f"at most {MAX_URIS} resourceSubscriptions per stream")
    return list(dict.fromkeys(uris))


class Updates:
    """The open streams, and the URIs changed since each last heard."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._changed = threading.Condition()
        self._streams: list[_Stream] = []
        self._closed = False

    def listening(self) -> bool:
        """Whether any stream is open (the GUI looks for the user's edits only then)."""
        return bool(self._streams)

    def wanted(self) -> frozenset[str]:
        """Every URI some open stream names: a publisher works out only these."""
        with self._changed:
            return frozenset().union(*(stream.wanted for stream in self._streams))

    def publish(self, uris: Iterable[str]) -> None:
        with self._changed:
            if not self._streams:
                return
            touched = set(uris)
            for stream in self._streams:
                stream.pending |= touched & stream.wanted
            self._changed.notify_all()

    def close(self) -> None:
        """The bridge stops: every stream ends with its graceful result."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def listen(self, subscription_id: str | int, uris: list[str], send: Send, present: Callable[[], bool]) -> None:
        """Serve one stream until its client leaves (`present` turns false, or a write fails) or the bridge stops
        (then its end goes out as far as the socket takes it at once: the graceful result, then the stream's last
        chunk). Blocks: its driver runs it on a thread of its own."""
        stream = _Stream(frozenset(uris))
        meta = {SUBSCRIPTION_ID: subscription_id}
        acknowledged = {"notifications": {"resourceSubscriptions": uris}, "_meta": meta}
        pending = bytearray(HEAD) + _notification("notifications/subscriptions/acknowledged", acknowledged)
        with self._changed:
            if self._closed:
                raise RpcError(INTERNAL_ERROR, "the bridge is stopping")
            if len(self._streams) >= MAX_STREAMS:
                raise RpcError(INTERNAL_ERROR, f"{MAX_STREAMS} streams are open, the most one bridge keeps")
            self._streams.append(stream)
        try:
            last_sent, last_word = -COALESCE, self._clock()
            while True:
                try:  # the head and acknowledgment at once, then what each wake-up added
                    del pending[: send(bytes(pending))]
                except OSError:
                    return
                if not present():
                    return
                with self._changed:
                    now = self._clock()
                    due = self._due(stream, pending, now, last_sent)
                    if not self._closed and not due:
                        wait = min(LOOK, KEEPALIVE - (now - last_word))
                        if stream.pending and len(pending) < PENDING_LIMIT:
                            wait = min(wait, COALESCE - (now - last_sent))
                        self._changed.wait(max(0.0, wait))
                        now = self._clock()
                    if self._closed:
                        result = {"resultType": "complete", "_meta": meta}
                        pending += event(encode({"jsonrpc": "2.0", "id": subscription_id, "result": result})) + END
                        with contextlib.suppress(OSError):
                            send(bytes(pending))
                        return
                    taken: set[str] = set()
                    if self._due(stream, pending, now, last_sent):
                        taken, stream.pending = stream.pending, set()
                for uri in sorted(taken):
                    pending += _notification("notifications/resources/updated", {"uri": uri, "_meta": meta})
                if taken:
                    last_sent = last_word = now
                elif now - last_word >= KEEPALIVE:
                    if not pending:  # a client that reads nothing gets nothing more: its URIs wait, merged
                        pending += KEEPALIVE_CHUNK
                    last_word = now
        finally:
            with self._changed:
                self._streams.remove(stream)

    @staticmethod
    def _due(stream: _Stream, pending: bytearray, now: float, last_sent: float) -> bool:
        """Whether the URIs changed go out now: some did, the last went out COALESCE ago, and the client has read
        what was sent (else they wait in the set, where a URI changed again is still one)."""
        return bool(stream.pending) and now - last_sent >= COALESCE and len(pending) < PENDING_LIMIT


def _notification(method: str, params: dict[str, Any]) -> bytes:
    return event(encode({"jsonrpc": "2.0", "method": method, "params": params}))
