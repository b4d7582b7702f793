"""Before a client authenticates it gets seconds, no buffer and no hold on a slot another user needs."""

from __future__ import annotations

import errno
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import pytest

from blender_addon.net import threaded
from blender_addon.net.admission import AcceptBackoff, Admission, Full, backoff, cap_for
from blender_addon.net.conversation import ClientState, OurState, Output
from blender_addon.net.http import HttpLimits
from blender_addon.net.threaded import TcpListener

from .conftest import MODERN_META, Endpoint, modern_headers, start_endpoint
from .drivers import Greeting, Holding

CAP = 6


@pytest.fixture
def small(driver: str) -> Iterator[Endpoint]:
    """A cap of six connections, patient idle timeouts (so only eviction can free a slot)."""
    endpoint = start_endpoint(HttpLimits(first_byte_timeout=30, header_timeout=30), max_connections=CAP, driver=driver)
    yield endpoint
    endpoint.listener.stop()


def _head(endpoint: Endpoint, token: str, length: int = 0) -> bytes:
    return (
        f"POST /mcp HTTP/1.1\r\nHost: {endpoint.host}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def _served(endpoint: Endpoint) -> bool:
    status, _, body = endpoint.rpc("tools/call", {"name": "echo", "arguments": {"ok": True}})
    return status == 200 and body["result"]["structuredContent"] == {"echo": {"ok": True}}


def test_a_stranger_that_sends_nothing_is_closed_after_the_first_byte_timeout(driver: str) -> None:
    endpoint = start_endpoint(HttpLimits(first_byte_timeout=0.2), driver=driver)
    try:
        with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as sock:
            assert sock.recv(1) == b""  # closed by the bridge, long before the socket's own 10 s
    finally:
        endpoint.listener.stop()


def test_a_stranger_that_dribbles_its_headers_gets_408(driver: str) -> None:
    endpoint = start_endpoint(HttpLimits(header_timeout=0.2), driver=driver)
    try:
        with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\n")  # and never the rest
            assert sock.recv(4096).startswith(b"HTTP/1.1 408 ")
    finally:
        endpoint.listener.stop()


@pytest.mark.parametrize("opening", [b"", b"POST /mcp HTTP/1.1\r\nHost: x\r\n"], ids=["idle", "half-sent headers"])
def test_squatting_sockets_at_the_cap_cannot_lock_the_owner_out(small: Endpoint, opening: bytes) -> None:
    squatters = [socket.create_connection(("127.0.0.1", small.port), timeout=10) for _ in range(CAP * 2)]
    try:
        for sock in squatters:
            sock.sendall(opening)
        assert _served(small)
    finally:
        for sock in squatters:
            sock.close()


def test_a_refused_request_is_answered_from_its_headers_and_its_body_is_never_read(small: Endpoint) -> None:
    with socket.create_connection(("127.0.0.1", small.port), timeout=10) as sock:
        sock.sendall(_head(small, "wrong-token", length=5_000_000))  # announces 5 MB, sends none
        reply = sock.recv(4096)
        assert reply.startswith(b"HTTP/1.1 401 ") and b"Connection: close" in reply
        assert sock.recv(4096) == b""  # closed: no buffer is kept for it
    assert small.tools.calls == []


@pytest.mark.parametrize(("host", "path", "status"), [("evil.test", "/mcp", 403), (None, "/other", 404)])
def test_403_and_404_close_the_connection(small: Endpoint, host: str | None, path: str, status: int) -> None:
    head = _head(small, small.token.reveal()).replace(b"/mcp", path.encode())
    if host:
        head = head.replace(small.host.encode(), host.encode())
    with socket.create_connection(("127.0.0.1", small.port), timeout=10) as sock:
        sock.sendall(head)
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
    assert reply.startswith(f"HTTP/1.1 {status} ".encode()) and b"Connection: close" in reply


def test_busy_authenticated_connections_are_never_evicted_and_the_listener_recovers() -> None:
    release, entered = threading.Event(), threading.Semaphore(0)

    def busy() -> bytes:
        entered.release()
        release.wait(10)
        return b"done"

    listener = TcpListener(
        "127.0.0.1",
        0,
        lambda peer: Holding(peer, busy),
        name="t",
        admission=Admission(2),
        on_overflow=lambda c: c.sendall(b"busy"),
    )
    try:
        held = [socket.create_connection(listener.address, timeout=10) for _ in range(2)]
        assert entered.acquire(timeout=5) and entered.acquire(timeout=5)
        with socket.create_connection(listener.address, timeout=10) as extra:
            assert extra.recv(10) == b"busy"
        release.set()
        assert [sock.recv(10) for sock in held] == [b"done", b"done"]
        for sock in held:
            sock.close()
    finally:
        listener.stop()
    assert listener.connection_count == 0


@dataclass
class _Talk:
    client_state: ClientState
    trusted: bool
    our_state: OurState = OurState.IDLE


def test_at_the_cap_a_strangers_unread_bytes_never_spare_it_but_a_known_clients_waiting_request_does() -> None:
    """Squatters that sent half a header the loop has not read yet must still make room for the owner."""
    admission: Admission[str] = Admission(2)
    assert admission.admit("squatter 1", _Talk(ClientState.IDLE, trusted=False), lambda key: False) is None
    assert admission.admit("squatter 2", _Talk(ClientState.SENDING, trusted=False), lambda key: False) is None
    assert admission.admit("owner", _Talk(ClientState.IDLE, trusted=False), lambda key: True) == "squatter 1"
    known: Admission[str] = Admission(2)
    known.admit("known", _Talk(ClientState.IDLE, trusted=True), lambda key: True)
    known.admit("stranger", _Talk(ClientState.IDLE, trusted=False), lambda key: True)
    assert known.admit("newcomer", _Talk(ClientState.IDLE, trusted=False), lambda key: True) == "stranger"


@pytest.mark.parametrize(("limit", "cap"), [(256, 64), (1024, 256), (100, 16), (65536, 256)])
def test_the_cap_leaves_blender_its_own_descriptors(limit: int, cap: int) -> None:
    assert cap_for(limit) == cap


def test_accept_failures_back_off_instead_of_spinning() -> None:
    """Out of descriptors (a real EMFILE in a child process): the accept loop waits longer each time."""
    child = """
import json, os, resource, sys, threading
from blender_addon.net.threaded import TcpListener
from tests.net.drivers import Greeting
waits, enough = [], threading.Event()
def wait(seconds):
    waits.append(seconds)
    if len(waits) >= 5:
        enough.set()
    enough.wait(seconds)
listener = TcpListener("127.0.0.1", 0, Greeting, name="t", wait=wait)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(int(fd) for fd in os.listdir("/proc/self/fd")) + 1, hard))
try:
    while True:
        os.open(os.devnull, os.O_RDONLY)  # fill every free descriptor below the limit
except OSError:
    pass
print(listener.address[1], flush=True)
enough.wait(10)
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
print(json.dumps(waits[:5]), flush=True)
os._exit(0)
"""
    with subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        with socket.create_connection(("127.0.0.1", port), timeout=10):  # queued; accepting it needs a descriptor
            waits = json.loads(process.stdout.readline())
    assert waits == [backoff(n) for n in range(1, 6)] == [0.01, 0.02, 0.04, 0.08, 0.16]


def test_a_thread_that_cannot_start_releases_its_slot_and_the_listener_keeps_accepting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served = threading.Event()

    class Served(Greeting):
        def opened(self, now: float) -> Output:
            served.set()  # on the connection's own thread
            return super().opened(now)

    listener = TcpListener("127.0.0.1", 0, Served, name="t")
    real_thread = threaded.threading.Thread

    class NoThreads(real_thread):  # type: ignore[misc, valid-type]
        def start(self) -> None:
            raise RuntimeError("can't start new thread")

    try:
        monkeypatch.setattr(threaded.threading, "Thread", NoThreads)
        with socket.create_connection(listener.address, timeout=10) as refused:
            assert refused.recv(1) == b""  # closed, not left hanging
        assert listener.connection_count == 0
        monkeypatch.setattr(threaded.threading, "Thread", real_thread)
        socket.create_connection(listener.address, timeout=10).close()
        assert served.wait(5)
    finally:
        listener.stop()


def test_a_known_client_in_the_middle_of_a_request_is_never_closed_for_room() -> None:
    """Read in part (RECEIVING) or about to be (WAITING with its bytes unread): the cap is Full before it goes."""
    admission: Admission[str] = Admission(2)
    admission.admit("sending", _Talk(ClientState.SENDING, trusted=True), lambda key: False)
    admission.admit("sent", _Talk(ClientState.IDLE, trusted=True), lambda key: key == "sent")
    with pytest.raises(Full):
        admission.admit("stranger", _Talk(ClientState.IDLE, trusted=False), lambda key: key == "sent")


def test_at_the_cap_every_stranger_makes_room_before_a_known_clients_idle_connection() -> None:
    """A known client idle for 20 ms between two calls is older than every stranger who churns connections."""
    admission: Admission[str] = Admission(3)
    admission.admit("known", _Talk(ClientState.IDLE, trusted=True), lambda key: False)
    admission.admit("stranger 1", _Talk(ClientState.IDLE, trusted=False), lambda key: False)
    admission.admit("stranger 2", _Talk(ClientState.SENDING, trusted=False), lambda key: False)
    closed = [
        admission.admit(f"newcomer {n}", _Talk(ClientState.IDLE, trusted=False), lambda key: False) for n in range(3)
    ]
    assert closed == ["stranger 1", "stranger 2", "newcomer 0"] and "known" in admission.keys()
    only_known: Admission[str] = Admission(1)
    only_known.admit("known", _Talk(ClientState.IDLE, trusted=True), lambda key: False)
    assert only_known.admit("stranger", _Talk(ClientState.IDLE, trusted=False), lambda key: False) == "known"


@pytest.mark.parametrize("sent", ["headers and half the body", "nothing yet, on a kept connection"])
def test_a_known_clients_request_is_always_answered_whatever_strangers_do_at_the_cap(
    small: Endpoint, sent: str
) -> None:
    """The promise the relay's one resend rests on (README › Decisions): a known client's connection with part of a
    request sent (read by the bridge or still in the kernel) is never closed for room, and the request is answered;
    strangers make room before any known client. Here the owner's connection is the oldest, and strangers churn
    the cap past it many times over."""
    params = {"name": "echo", "arguments": {}, "_meta": MODERN_META}
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
    head = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in modern_headers("tools/call", params).items())
    request = _head(small, small.token.reveal(), len(body)).replace(b"\r\n\r\n", b"\r\n" + head.encode() + b"\r\n")
    request += body.encode()
    half = len(request) - len(body) // 2

    def known() -> socket.socket:
        """A connection that has had one request answered: a known client's, in the bridge's eyes."""
        sock = socket.create_connection(("127.0.0.1", small.port), timeout=10)
        sock.sendall(request)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        return sock

    with known() as owner:
        others: list[socket.socket] = []
        if sent == "headers and half the body":
            owner.sendall(request[:half])
            # Known clients in the middle of their next requests take all but one slot, which strangers churn.
            others = [known() for _ in range(CAP - 2)]
            for sock in others:
                sock.sendall(request[:half])
        strangers = [socket.create_connection(("127.0.0.1", small.port), timeout=10) for _ in range(CAP * 4)]
        for sock in strangers:
            sock.close()
        owner.sendall(request[half:] if sent.startswith("headers") else request)
        answer = owner.recv(65536)
        for sock in others:
            sock.sendall(request[half:])
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
            sock.close()
    assert answer.startswith(b"HTTP/1.1 200 ") and b'"id":7' in answer.replace(b" ", b"")


class _Asking:
    """A known client's conversation: any bytes are a whole request, handed out to run."""

    client_state = ClientState.IDLE
    our_state = OurState.IDLE
    trusted = True

    def __init__(self) -> None:
        self.ran: list[bytes] = []

    def opened(self, now: float) -> Output:
        return Output()

    def received(self, data: bytes, now: float) -> Output:
        if not data:
            return Output(close=True)
        self.client_state, self.our_state = ClientState.DONE, OurState.RUNNING
        return Output(run=lambda: self.ran.append(data))

    def answered(self, result: object, now: float) -> Output:
        self.client_state, self.our_state = ClientState.IDLE, OurState.IDLE
        return Output(b"answer")

    def deadline(self) -> float:
        return float("inf")

    def expired(self, now: float) -> Output:
        return Output(close=True)


def test_a_request_that_reaches_a_connection_chosen_to_make_room_is_never_run() -> None:
    """The accept thread picks an idle known connection for room and shuts it; a request that arrived between the
    pick and the shutdown is still read from the kernel. Run, its answer would be lost and the client (told
    nothing) would send it again: it must not run at all."""
    admission: Admission[socket.socket] = Admission(1)
    ours, client = socket.socketpair()
    conversation = _Asking()
    with ours, client:
        admission.admit(ours, conversation, lambda key: False)
        assert admission.admit(client, _Talk(ClientState.IDLE, trusted=False), lambda key: False) is ours
        client.sendall(b"a request, sent as the bridge chose this connection for room")
        client.shutdown(socket.SHUT_WR)
        threaded.converse(ours, conversation, threading.Event(), partial(admission.holds, ours))
    assert conversation.ran == []


def test_the_accept_backoff_stops_at_one_second_and_starts_over_after_a_success() -> None:
    accepts = AcceptBackoff("t")
    failure = OSError(errno.EMFILE, "Too many open files")
    assert [accepts.failed(failure) for _ in range(10)] == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0, 1.0]
    accepts.succeeded()
    assert accepts.failed(failure) == 0.01
