"""`subscriptions/listen` streams, on both drivers and in `Updates` itself: what a listener hears, and the bounds
that keep a stranger's or a stuck client's streams from costing anyone else."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from blender_addon.errors import RpcError
from blender_addon.net.event_stream import PENDING_LIMIT
from blender_addon.net.http import HttpLimits
from blender_addon.net.subscriptions import KEEPALIVE, MAX_STREAMS, MAX_URI_CHARS, MAX_URIS, Updates, resource_filter
from tests.net.conftest import MODERN_META, Endpoint, modern_headers, start_endpoint

pytestmark = pytest.mark.timeout(60)


@contextmanager
def stream(endpoint: Endpoint, uris: list[str]) -> Iterator[socket.socket]:
    """A raw listen stream, its head and acknowledgment read."""
    params = {"notifications": {"resourceSubscriptions": uris}, "_meta": MODERN_META}
    body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": params}).encode()
    headers = endpoint.headers(**modern_headers("subscriptions/listen", params), Accept="text/event-stream")
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock = socket.create_connection(("127.0.0.1", endpoint.port), timeout=10)
    sock.sendall(f"POST /mcp HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    seen = b""
    while b"subscriptions/acknowledged" not in seen:
        seen += sock.recv(65536) or pytest.fail(f"closed before the acknowledgment: {seen!r}")
    try:
        yield sock
    finally:
        sock.close()


def _until(sock: socket.socket, word: bytes) -> bytes:
    seen = b""
    while word not in seen:
        seen += sock.recv(65536) or pytest.fail(f"closed before {word!r}: {seen!r}")
    return seen


@pytest.fixture
def short_limits_endpoint(driver: str) -> Iterator[Endpoint]:
    """A request must arrive within 0.5 s and an idle client goes after 1 s: a stream outlives both."""
    ep = start_endpoint(HttpLimits(request_timeout=0.5, idle_timeout=1.0), driver=driver)
    yield ep
    ep.listener.stop()


def test_a_stream_outlives_the_request_and_idle_deadlines_and_hears_an_update(short_limits_endpoint: Endpoint) -> None:
    with stream(short_limits_endpoint, ["blender://scene"]) as sock:
        time.sleep(2.0)  # past both deadlines: a stream is not a request waiting to arrive, nor an idle client
        short_limits_endpoint.updates.publish(["blender://scene", "blender://file"])
        heard = _until(sock, b"notifications/resources/updated")
    assert b"blender://scene" in heard and b"blender://file" not in heard


def test_a_client_that_hangs_up_frees_its_place_at_once(endpoint: Endpoint) -> None:
    """Seen at the stream's next look (LOOK), not at its next keep-alive's failed write (KEEPALIVE, and one more)."""
    with stream(endpoint, ["blender://scene"]):
        assert endpoint.updates.listening()
    deadline = time.monotonic() + KEEPALIVE / 2
    while endpoint.updates.listening() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not endpoint.updates.listening()


def test_the_acknowledgment_comes_before_any_change(endpoint: Endpoint) -> None:
    """No update is needed for the stream to begin: `stream` waits for the acknowledgment only."""
    with stream(endpoint, ["blender://scene"]):
        pass


def test_past_the_most_streams_a_listen_is_refused() -> None:
    updates = Updates()
    present = threading.Event()
    present.set()
    began = threading.Semaphore(0)

    def send(data: bytes) -> int:
        if b"acknowledged" in data:
            began.release()
        return len(data)

    threads = [
        threading.Thread(target=updates.listen, args=(n, ["u"], send, present.is_set), daemon=True)
        for n in range(MAX_STREAMS)
    ]
    for thread in threads:
        thread.start()
    for _ in threads:
        assert began.acquire(timeout=10)
    with pytest.raises(RpcError, match=f"{MAX_STREAMS} streams are open"):
        updates.listen("one too many", ["u"], send, lambda: False)  # were it served, it would end at once
    present.clear()
    for thread in threads:
        thread.join(10)
    assert not updates.listening()


def test_a_listen_over_http_1_0_is_refused_it_cannot_carry_a_stream(endpoint: Endpoint) -> None:
    params = {"notifications": {"resourceSubscriptions": ["u"]}, "_meta": MODERN_META}
    body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": params}).encode()
    headers = endpoint.headers(**modern_headers("subscriptions/listen", params), Accept="text/event-stream")
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    answer = endpoint.raw(f"POST /mcp HTTP/1.0\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    assert answer.startswith(b"HTTP/1.1 406") and b"text/event-stream" in answer


@pytest.mark.parametrize(
    ("uris", "word"),
    [
        (["u"] * 1 + [f"u{n}" for n in range(MAX_URIS)], f"at most {MAX_URIS}"),
        (["x" * (MAX_URI_CHARS + 1)], f"up to {MAX_URI_CHARS}"),
        ([""], "list of URIs"),
    ],
    ids=["too-many", "too-long", "empty"],
)
def test_a_filter_past_its_bounds_is_refused(uris: list[str], word: str) -> None:
    with pytest.raises(RpcError, match=word):
        resource_filter({"notifications": {"resourceSubscriptions": uris}})


def test_a_client_that_reads_nothing_costs_a_bounded_buffer_however_much_changes() -> None:
    """Its socket takes nothing: after the first burst, its changed URIs wait in the set, never as more bytes."""
    updates = Updates()
    uris = [f"blender://objects/{'long-name-' * 10}{n}" for n in range(600)]
    offered: list[int] = []
    present = threading.Event()
    present.set()

    def send(data: bytes) -> int:
        offered.append(len(data))
        return 0  # the client reads nothing

    thread = threading.Thread(target=updates.listen, args=(1, uris, send, present.is_set), daemon=True)
    thread.start()
    for _ in range(150):  # 1.5 s of every URI changing: six coalescing rounds
        updates.publish(uris)
        time.sleep(0.01)
    present.clear()
    thread.join(10)
    past_the_limit = [size for size in offered if size > PENDING_LIMIT]
    assert past_the_limit  # the first round alone passes the limit...
    assert len(set(past_the_limit)) == 1, sorted(set(past_the_limit))  # ...and nothing was added after it
