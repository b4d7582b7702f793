"""Bounded store of 2025-era MCP sessions.

Clients that open sessions and never end them must not grow memory without limit: idle
sessions expire and, at the cap, the least recently used one is evicted first.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Session:
    """A 2025-era MCP session: the version it agreed, and when it was last used (for the idle limit)."""

    protocol_version: str
    last_used: float


class SessionStore:
    def __init__(
        self, *, max_sessions: int = 256, idle_ttl: float = 3600.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._max = max_sessions
        self._ttl = idle_ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def create(self, protocol_version: str) -> str:
        now = self._clock()
        session_id = secrets.token_hex(16)
        with self._lock:
            self._expire(now)
            while len(self._sessions) >= self._max:
                self._sessions.popitem(last=False)
            self._sessions[session_id] = Session(protocol_version, now)
        return session_id

    def touch(self, session_id: str) -> Session | None:
        """The live session with this id (refreshing its idle clock), or None."""
        now = self._clock()
        with self._lock:
            self._expire(now)
            session = self._sessions.get(session_id)
            if session is not None:
                session.last_used = now
                self._sessions.move_to_end(session_id)
            return session

    def end(self, session_id: str) -> bool:
        with self._lock:
            return self._sessions.pop(session_id, None) is not None

    def _expire(self, now: float) -> None:
        while self._sessions:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now - oldest.last_used <= self._ttl:
                return
            del self._sessions[oldest_id]
