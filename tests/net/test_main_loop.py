"""The main-thread loop: one thread serves everyone, so nothing one client does may hold it."""

from __future__ import annotations

import errno
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from blender_addon.net import main_loop, threaded
from blender_addon.net.admission import backoff
from blender_addon.net.conversation import QUIET, Output, Peer

from .conftest import MODERN_META, Endpoint, modern_headers, start_endpoint
from .drivers import Greeting, Quiet, Served


@pytest.fixture
def big_endpoint(driver: str) -> Iterator[Endpoint]:
    endpoint = start_endpoint(driver=driver)
    yield endpoint
    endpoint.listener.stop()


def _served(endpoint: Endpoint) -> bool:
    status, _, body = endpoint.rpc("tools/call", {"name": "echo", "arguments": {"ok": True}})
    return status == 200 and body["result"]["structuredContent"] == {"echo": {"ok": True}}


def _sleeper(endpoint: Endpoint) -> socket.socket:
    """A client that asks for about 16 MB (the echo twice), reads the first bytes of the answer and no more.

    Its receive buffer is set small before it connects (or autotuning would take it all), so the
    rest of the answer cannot leave the server until it reads.
    """
    params = {"name": "echo", "arguments": {"pad": "x" * 8_000_000}, "_meta": MODERN_META}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    headers = endpoint.headers(**modern_headers("tools/call", params), Content_Length=str(len(body)))
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    sleeper = socket.socket()
    sleeper.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sleeper.settimeout(10)
    sleeper.connect(("127.0.0.1", endpoint.port))
    sleeper.sendall(f"POST /mcp HTTP/1.1\r\n{head}\r\n".encode() + body)
    assert sleeper.recv(12) == b"HTTP/1.1 200"  # its answer has begun
    return sleeper


def test_a_client_that_never_reads_its_large_answer_holds_up_nobody(big_endpoint: Endpoint) -> None:
    with _sleeper(big_endpoint):
        assert _served(big_endpoint)


def test_a_client_that_never_reads_its_answer_is_dropped_after_the_send_timeout(
    driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(threaded, "SEND_TIMEOUT", 0.3)
    monkeypatch.setattr(main_loop, "SEND_TIMEOUT", 0.3)
    endpoint = start_endpoint(driver=driver)
    try:
        with _sleeper(endpoint):
            deadline = time.monotonic() + 10
            while endpoint.listener.connection_count and time.monotonic() < deadline:
                time.sleep(0.05)
            assert endpoint.listener.connection_count == 0
            assert _served(endpoint)
    finally:
        endpoint.listener.stop()


class _Exploding(Quiet):
    """A conversation with a bug: it raises on the first bytes it is given."""

    def received(self, data: bytes, now: float) -> Output:
        if data.startswith(b"boom"):
            raise RuntimeError("a bug in a conversation")
        return Output(b"ok:" + data, close=True)


def _ask(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_conversation_that_raises_is_logged_once_closed_and_the_driver_serves_on(
    driver: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    served = Served(driver, _Exploding)
    try:
        assert _ask(served.address[1], b"boom") == b""
        assert _ask(served.address[1], b"hello") == b"ok:hello"
    finally:
        served.stop()
    [record] = [record for record in caplog.records if record.exc_info]
    assert "the bridge goes on serving" in record.getMessage() and "a bug in a conversation" in caplog.text
    assert "Traceback" not in capfd.readouterr().err.replace(caplog.text, "")  # not also printed by a thread hook


def test_a_conversation_that_cannot_be_made_closes_that_connection_and_the_driver_serves_on(
    driver: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """The MCP side loads with its listener's first client (`service.Bridge`): a load that fails closes that
    connection only, says so once, and the next client is served."""
    made: list[Peer] = []

    def conversation(peer: Peer) -> _Exploding:
        made.append(peer)
        if len(made) == 1:
            raise ImportError("the MCP side could not be loaded")
        return _Exploding(peer)

    served = Served(driver, conversation)
    try:
        try:
            first = _ask(served.address[1], b"hello")
        except ConnectionResetError:
            first = b""
        assert first == b""
        assert _ask(served.address[1], b"hello") == b"ok:hello"
    finally:
        served.stop()
    [record] = [record for record in caplog.records if record.exc_info]
    assert "the bridge goes on serving" in record.getMessage() and "could not be loaded" in caplog.text
    assert "Traceback" not in capfd.readouterr().err.replace(caplog.text, "")


class _FailingAccepts:
    """The listening socket, whose first accepts fail as they do when the process is out of descriptors."""

    def __init__(self, sock: socket.socket, failures: int) -> None:
        self._sock, self._failures = sock, failures
        self.attempts: list[float] = []

    def fileno(self) -> int:
        return self._sock.fileno()

    def accept(self) -> tuple[socket.socket, object]:
        self.attempts.append(time.monotonic())
        if len(self.attempts) <= self._failures:
            raise OSError(errno.EMFILE, "Too many open files")
        return self._sock.accept()

    def close(self) -> None:
        self._sock.close()


def test_after_an_accept_failure_the_loop_waits_before_it_accepts_again() -> None:
    loop = main_loop.MainLoop()
    port = loop.listen("127.0.0.1", 0, Greeting, name="t")[1]
    [listening] = loop._listening
    failing = _FailingAccepts(listening.sock, failures=4)
    listening.sock = failing  # type: ignore[assignment]
    stopping = threading.Event()
    serving = threading.Thread(target=loop.run, args=(stopping.is_set,), daemon=True)
    serving.start()
    try:
        assert _ask(port, b"") == b"hello"  # accepted once the failures are over
    finally:
        stopping.set()
        loop.wake()
        serving.join(10)
        loop.close()
    gaps = [later - earlier for earlier, later in zip(failing.attempts, failing.attempts[1:], strict=False)]
    assert len(gaps) >= 4 and all(gap >= backoff(n) for n, gap in enumerate(gaps[:4], start=1)), gaps


def test_accept_failures_pause_the_listener_and_the_loop_recovers() -> None:
    """Out of descriptors (a real EMFILE in a child process): the listener rests longer each time, then serves."""
    child = """
import logging, os, resource, threading
from blender_addon.net.main_loop import MainLoop
from tests.net.drivers import Greeting
pauses, enough = [], threading.Event()
class Note(logging.Handler):
    def emit(self, record):
        if "retrying in" in record.getMessage():
            pauses.append(float(record.getMessage().split("retrying in ")[1].split()[0]))
            if len(pauses) >= 5:
                enough.set()
logging.getLogger("hermes_bridge.net").addHandler(Note())
loop = MainLoop()
port = loop.listen("127.0.0.1", 0, Greeting, name="t")[1]
stopping = threading.Event()
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(int(fd) for fd in os.listdir("/proc/self/fd")) + 1, hard))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))  # fill every free descriptor below the limit
except OSError:
    pass
serving = threading.Thread(target=loop.run, args=(stopping.is_set,))
serving.start()
print(port, flush=True)
enough.wait(10)
for fd in held:
    os.close(fd)
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
print(repr(pauses[:5]), flush=True)
input()
stopping.set()
loop.wake()
serving.join()
"""
    with subprocess.Popen(
        [sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None and process.stdin is not None
        port = int(process.stdout.readline())
        with socket.create_connection(("127.0.0.1", port), timeout=10) as queued:  # accepting it needs a descriptor
            pauses = process.stdout.readline()
            assert queued.recv(16) == b"hello"  # accepted once descriptors were free again
        process.stdin.write("\n")
        process.stdin.flush()
    assert pauses.strip() == repr([backoff(n) for n in range(1, 6)])


class _Heard(Quiet):
    """A connection that says nothing and waits; `heard` records whose bytes were read, in order."""

    def __init__(self, peer: Peer, heard: list[str], name: str, trusted: bool) -> None:
        super().__init__(peer, trusted=trusted)
        self._heard, self._name = heard, name

    def received(self, data: bytes, now: float) -> Output:
        self._heard.append(self._name)
        return QUIET


def _turns(loop: main_loop.MainLoop, count: int = 1) -> None:
    """Run exactly `count` turns of the loop on this thread."""
    left = [count]

    def stop() -> bool:
        left[0] -= 1
        return left[0] < 0

    loop.run(stop)


def test_a_turn_accepts_at_most_its_share_and_the_rest_wait_in_the_backlog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(main_loop, "ACCEPTS_PER_TURN", 3)
    loop = main_loop.MainLoop()
    address = loop.listen("127.0.0.1", 0, lambda peer: _Heard(peer, [], "any", False), name="t")
    clients = [socket.create_connection(address, timeout=10) for _ in range(5)]
    try:
        _turns(loop)
        assert loop.connection_count == 3
        _turns(loop)
        assert loop.connection_count == 5
    finally:
        loop.close()
        for client in clients:
            client.close()


def test_a_known_client_that_becomes_ready_during_a_turn_is_served_before_the_next_stranger() -> None:
    """Reading the first stranger makes the known client's request arrive (as another process's might, while the
    loop works): it is read before the second stranger, not a whole turn of strangers later."""
    heard: list[str] = []
    made: list[str] = []
    known_client: list[socket.socket] = []

    def conversation(peer: Peer) -> _Heard:
        name = "known" if not made else f"stranger {len(made)}"
        made.append(name)
        quiet = _Heard(peer, heard, name, trusted=name == "known")
        if name == "stranger 1":
            received = quiet.received

            def received_then_known_sends(data: bytes, now: float) -> Output:
                if data:
                    known_client[0].sendall(b"request")
                return received(data, now)

            quiet.received = received_then_known_sends  # type: ignore[method-assign]
        return quiet

    loop = main_loop.MainLoop()
    address = loop.listen("127.0.0.1", 0, conversation, name="t")
    clients = [socket.create_connection(address, timeout=10)]
    known_client.append(clients[0])
    try:
        _turns(loop)
        clients += [socket.create_connection(address, timeout=10) for _ in range(3)]
        _turns(loop)
        assert loop.connection_count == 4 and heard == []
        for stranger in clients[1:]:
            stranger.sendall(b"x")
        _turns(loop)
        assert heard[:2] == ["stranger 1", "known"] and sorted(heard) == sorted(made)
    finally:
        loop.close()
        for client in clients:
            client.close()
