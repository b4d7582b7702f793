"""One connection's protocol as a conversation that does no I/O, and the blocking driver for it.

Each protocol (MCP over HTTP, the Blender Lab wire) says what to answer to the bytes that
arrived, and when it stops waiting for more; it never reads, writes or sleeps. So the same
rules (limits, deadlines, refusals) hold under both drivers: a thread per connection in the
GUI, where Blender's main thread belongs to the interface, and the main-thread loop in
background mode (`main_loop.py`), where no thread hands jobs to another.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Protocol

RECV_BYTES = 65536
SEND_TIMEOUT = 30.0
"""Seconds a client may take to read one answer before the connection is dropped."""


@dataclass(frozen=True)
class Reply:
    """Bytes to send now, and whether the connection ends once they are sent."""

    data: bytes = b""
    close: bool = False


QUIET = Reply()


class Conversation(Protocol):
    def opened(self) -> Reply:
        """Called once, when the connection is accepted (e.g. to refuse a peer at once)."""
        ...

    def received(self, data: bytes) -> Reply:
        """New bytes from the client; b"" when it closed its side (the answer then always closes)."""
        ...

    def deadline(self) -> float:
        """`time.monotonic()` at which waiting for the client ends (math.inf: no limit)."""
        ...

    def expired(self) -> Reply:
        """Called once the deadline has passed: the answer to a silent client, which moves the deadline on."""
        ...


def converse(conn: socket.socket, conversation: Conversation) -> None:
    """Drive a conversation on a blocking socket until it closes; OSError means the client went away."""
    reply = conversation.opened()
    while True:
        if reply.data:
            conn.settimeout(SEND_TIMEOUT)
            conn.sendall(reply.data)
        if reply.close:
            return
        remaining = conversation.deadline() - time.monotonic()
        if remaining <= 0:
            reply = conversation.expired()
            continue
        conn.settimeout(remaining)
        try:
            data = conn.recv(RECV_BYTES)
        except TimeoutError:
            reply = QUIET
            continue
        except OSError:  # reset: the same as a close to the conversation
            data = b""
        reply = conversation.received(data)
        if not data and not reply.close:
            reply = Reply(reply.data, close=True)
