"""What both drivers decide alike about connections: the cap, who makes room, how to back off, what a bug costs.

At the cap a new connection is not refused while another can make room: strangers first (the
oldest connection that proved nothing), and only when none is left a known client's idle one
with nothing unread, oldest first. A connection with a request in flight (or being sent by a
client that authenticated) is never closed for room, so idle sockets opened by anyone on the
machine cannot lock its own user out or close a known client's kept connection between two of
its calls. Every line here a stranger can cause goes through the rate-limited log (refusals.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from .conversation import ClientState, Conversation, OurState
from .refusals import refusals

log = logging.getLogger("hermes_bridge.net")

RESERVED_FILES = 128
"""Descriptors left to Blender itself (files, images, libraries) when the cap is derived."""
MAX_BACKOFF = 1.0
STOP_TIMEOUT = 5.0
"""Seconds a stopping driver gives the answers being written to go out whole (a client that does not read them
is dropped then), and its threads to end. The stop policy of both drivers: an answer being written goes out; a
request not yet whole, or read but not run, is closed without one (the client did nothing wrong)."""

Key = TypeVar("Key", bound=Hashable)


def default_max_connections() -> int:
    """Half of what the process's descriptor limit leaves after Blender's own share, within 16..256."""
    try:
        import resource  # POSIX only; Windows has no such per-process descriptor limit for sockets
    except ImportError:
        return 256
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 256
    return 256 if soft == resource.RLIM_INFINITY else cap_for(soft)


def cap_for(descriptor_limit: int) -> int:
    """E.g. 64 connections under macOS's usual 256 for GUI apps, 256 under Linux's 1024."""
    return max(16, min(256, (descriptor_limit - RESERVED_FILES) // 2))


def evictable(conversation: Conversation) -> bool:
    """Whether closing it for room costs nobody a request: it waits for its next one, or proved nothing yet."""
    if conversation.our_state is not OurState.IDLE:
        return False
    client = conversation.client_state
    return client is ClientState.IDLE or (client is ClientState.SENDING and not conversation.trusted)


class Admission(Generic[Key]):
    """The connections of one driver, under one cap; thread-safe (the threaded driver admits on its accept thread)."""

    def __init__(self, cap: int | None = None) -> None:
        self.cap = cap or default_max_connections()
        self._lock = threading.Lock()
        self._entries: dict[Key, Conversation] = {}
        """In the order they were admitted: the first of a kind is its oldest."""

    def __len__(self) -> int:
        return len(self._entries)

    def admit(self, key: Key, conversation: Conversation, unread: Callable[[Key], bool]) -> Key | None:
        """Count `key` in; at the cap first forget the connection to close for it (returned), or raise Full."""
        with self._lock:
            victim = None
            if len(self._entries) >= self.cap:
                victim = self._oldest_evictable(unread)
                if victim is None:
                    raise Full
                del self._entries[victim]
            self._entries[key] = conversation
        if victim is not None:
            refusals.say(
                log,
                "closings at the connection cap",
                f"connection cap ({self.cap}) reached: closed the oldest unauthenticated (else idle) connection",
            )
        return victim

    def holds(self, key: Key) -> bool:
        """Whether `key` is still counted in: not forgotten, and not closed to make room."""
        with self._lock:
            return key in self._entries

    def forget(self, key: Key) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def keys(self) -> list[Key]:
        with self._lock:
            return list(self._entries)

    def _oldest_evictable(self, unread: Callable[[Key], bool]) -> Key | None:
        """Strangers before known clients (a known client idle 20 ms between two calls is older than every
        stranger who churns connections), each oldest first. Entries are kept in the order they were admitted,
        so the first stranger found is the oldest: at the cap under a flood this is one step, not a sort."""
        known = []
        for key, conversation in self._entries.items():
            if evictable(conversation):
                if not conversation.trusted:
                    return key
                known.append(key)
        for key in known:
            # A known client whose next request already waits in the kernel is not idle. A stranger's unread bytes
            # prove nothing: sparing them let squatters that had just sent half a header lock the owner out.
            if not unread(key):
                return key
        return None


class Full(Exception):
    """At the cap, and every connection is busy: the new one is closed."""


class AcceptBackoff:
    """After an accept failure (e.g. out of descriptors) retrying at once would spin: wait longer each time."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._failures = 0

    def failed(self, exc: OSError) -> float:
        """Seconds to wait before the next accept."""
        self._failures += 1
        pause = backoff(self._failures)
        refusals.say(
            log, f"failed accepts on {self._name}", f"accept failed on {self._name} ({exc}); retrying in {pause:.2f} s"
        )
        return pause

    def succeeded(self) -> None:
        self._failures = 0


def backoff(failures: int) -> float:
    """Seconds to wait after the n-th accept failure in a row: 10 ms, doubling, at most MAX_BACKOFF."""
    return min(MAX_BACKOFF, 0.01 * 2 ** (failures - 1))


def conversation_failed(exc: BaseException) -> None:
    """A bug in one conversation (or the work it handed out) closes that connection only, said once, in the log."""
    refusals.say(
        log,
        "unexpected connection failures",
        "a connection failed unexpectedly; it was closed and the bridge goes on serving",
        exc_info=exc,
        level=logging.ERROR,
    )
