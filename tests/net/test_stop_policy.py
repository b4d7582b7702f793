"""One stop policy on both drivers: an answer being written when the bridge stops goes out whole, within the stop's
deadline; one its client does not read by then is dropped."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from functools import partial

import pytest

from blender_addon.net.http import HttpConversation, HttpLimits, Request, Response

from .drivers import Served

BIG = b"x" * (40 * 1024 * 1024)
"""Far more than the kernel's buffers on both ends hold: most of it is still ours to write when the stop comes."""
HEAD_BYTES = len(Response(200, BIG).encode()) - len(BIG)


def _big(request: Request) -> Response:
    return Response(200, BIG)


@pytest.fixture
def served(driver: str) -> Iterator[Served]:
    served = Served(driver, partial(HttpConversation, app=_big, limits=HttpLimits(), gate=lambda request: None))
    yield served
    served.stop()  # idempotent: already stopped by the test


def _slow_reader(served: Served) -> socket.socket:
    """A client whose answer has begun to arrive, and whose small receive buffer keeps the rest with the bridge."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(20)
    sock.connect(served.address)
    sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    assert sock.recv(12) == b"HTTP/1.1 200"
    return sock


def _read_all(sock: socket.socket) -> int:
    count = 0
    try:
        while chunk := sock.recv(1 << 20):
            count += len(chunk)
    except ConnectionResetError:
        pass
    return count


def _stopping(served: Served, timeout: float) -> threading.Thread:
    stopping = threading.Thread(target=served.stop, args=(timeout,), daemon=True)
    stopping.start()
    return stopping


def test_an_answer_being_written_when_the_bridge_stops_arrives_whole(served: Served) -> None:
    with _slow_reader(served) as sock:
        stopping = _stopping(served, timeout=60.0)
        assert 12 + _read_all(sock) == HEAD_BYTES + len(BIG)
    stopping.join(60)
    assert not stopping.is_alive() and served.connection_count == 0


def test_an_answer_its_client_does_not_read_is_dropped_at_the_stops_deadline(served: Served) -> None:
    with _slow_reader(served) as sock:
        stopping = _stopping(served, timeout=0.3)
        stopping.join(20)  # well before the 30 s a client is given to read one answer
        assert not stopping.is_alive() and served.connection_count == 0
        assert 12 + _read_all(sock) < HEAD_BYTES + len(BIG)
