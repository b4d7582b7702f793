"""What the drivers and a running request's watcher ask of a client's socket, without ever waiting.

The conversations hold none of this (they see the peer as a value, `conversation.Peer`): these
are the few questions only the socket can answer, asked of its readiness through poll (select()
cannot take descriptors past 1023; Windows has no poll, and its select takes any socket).
"""

from __future__ import annotations

import select
import socket
from functools import partial

from .conversation import Peer


def peer_of(sock: socket.socket) -> Peer:
    """The peer of an accepted socket; OSError when it has already left."""
    return Peer(
        sock.getsockname()[:2],
        sock.getpeername()[:2],
        partial(ended, sock),
        partial(writable, sock),
        partial(send_now, sock),
    )


def ended(sock: socket.socket) -> bool:
    """Whether the client's sending side has ended: its close, or a reset, waits unread (a client that waits for
    its answer sends nothing, so bytes waiting instead are a pipelined request: not an end)."""
    if not has_unread(sock):
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""  # readable: data or the end is there, so this never waits
    except BlockingIOError:
        return False
    except OSError:
        return True


def writable(sock: socket.socket) -> bool:
    """Whether a write can still reach the client: a zero-length send fails once a reset came back (a client
    that closed answers the first bytes that reach it with one; on loopback within that write, on Linux)."""
    try:
        if not _ready(sock, writing=True):
            return True  # its buffer is full: the client is there, it only reads slowly (a reset makes it ready)
        sock.send(b"", _NOW)
    except (BlockingIOError, InterruptedError):
        return True
    except (OSError, ValueError):  # ValueError: closed under us
        return False
    return True


def send_now(sock: socket.socket, data: bytes) -> int:
    """Send what the socket takes without waiting; how many bytes that was. OSError when the client is gone.

    Called off the connection's own thread while its request runs (nothing else writes then), on a
    blocking socket (threaded driver) or a non-blocking one (main loop).
    """
    if not data:
        return 0
    try:
        # Asked first: Python waits for a socket with a timeout to be writable before it even tries.
        if not _ready(sock, writing=True):
            return 0
        return sock.send(data, _NOW)  # Windows has no MSG_DONTWAIT: writable there means it takes some
    except (BlockingIOError, InterruptedError):
        return 0
    except ValueError:  # closed under us
        raise OSError("the connection is closed") from None


_NOW = getattr(socket, "MSG_DONTWAIT", 0) | getattr(socket, "MSG_NOSIGNAL", 0)
"""Never wait, and a write to a reset connection is an error, never SIGPIPE (a host may not ignore it)."""


def has_unread(sock: socket.socket) -> bool:
    """Whether bytes (or a close) from the client wait unread in the kernel: such a client is not idle.

    Asked of the socket's readiness, never of `recv`: on a socket with a timeout (the threaded driver's,
    read by another thread) Python's `recv` waits up to that timeout even with MSG_DONTWAIT.
    """
    try:
        return _ready(sock, writing=False)
    except (OSError, ValueError):  # closed under us
        return True


def _ready(sock: socket.socket, *, writing: bool) -> bool:
    """Whether `sock` is writable (or readable) now."""
    if _poll is None:
        readable, writable_now, _ = select.select([] if writing else [sock], [sock] if writing else [], [], 0)
        return bool(writable_now or readable)
    poller = _poll()
    poller.register(sock, select.POLLOUT if writing else select.POLLIN)
    return bool(poller.poll(0))


_poll = getattr(select, "poll", None)
