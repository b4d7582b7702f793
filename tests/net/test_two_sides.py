"""Each direction of a connection has its own state: a client that ends its sending side after a whole request
still gets the answer; "the client left" is a request cut short, or a write that met a reset."""

from __future__ import annotations

import ast
import json
import socket
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import h11
import pytest

from blender_addon.net.conversation import Peer
from blender_addon.net.http import HttpConversation, HttpLimits, Request, Response

from .conftest import MODERN_META, Endpoint, modern_headers
from .drivers import Served

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
NET = Path(__file__).resolve().parents[2] / "blender_addon" / "net"


def _call(endpoint: Endpoint, name: str, arguments: dict) -> bytes:
    params = {"name": name, "arguments": arguments, "_meta": MODERN_META}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    headers = endpoint.headers(**modern_headers("tools/call", params), Content_Length=str(len(body)))
    return ("POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode() + body


def _answers(sock: socket.socket) -> tuple[list[int], bytes]:
    """The statuses the client reads (interim ones first) and the final body, read as h11 reads them, up to the
    bridge's close."""
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="POST", target="/mcp", headers=[("Host", "x"), ("Content-Length", "0")]))
    client.send(h11.EndOfMessage())
    statuses, body = [], b""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(sock.recv(65536))
        elif isinstance(event, (h11.InformationalResponse, h11.Response)):
            statuses.append(event.status_code)
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert sock.recv(1) == b"", "the connection stays open after a client ended its side"
            return statuses, body


@pytest.mark.parametrize("seconds", [0.0, 0.3], ids=["at-once", "while-it-runs"])
def test_a_client_that_shuts_its_sending_side_after_a_whole_request_gets_the_answer_then_the_close(
    endpoint: Endpoint, seconds: float
) -> None:
    """`shutdown(SHUT_WR)`, `nc -N`: legal HTTP/1.1. Its request runs; the end seen while it runs is answered with
    `100 Continue` (the one interim answer HTTP/1.1 allows), which a client that closed would have reset."""
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as sock:
        sock.sendall(_call(endpoint, "sleep", {"seconds": seconds}))
        sock.shutdown(socket.SHUT_WR)
        statuses, body = _answers(sock)
    assert statuses[-1] == 200 and set(statuses[:-1]) <= {100}
    assert json.loads(body)["result"]["structuredContent"] == {"slept": seconds}
    assert endpoint.tools.calls == [("sleep", {"seconds": seconds})]


class _Asked:
    """A scripted app: each request waits for the test's word, then records what `connected` says."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.said: list[bool] = []
        self.asked = threading.Event()

    def __call__(self, request: Request) -> Response:
        self.go.wait(10)
        self.said.append(request.connected())
        self.asked.set()
        return Response(200, b"done")


@pytest.fixture
def asked(driver: str) -> Iterator[tuple[_Asked, Served]]:
    app = _Asked()
    served = Served(driver, partial(HttpConversation, app=app, limits=HttpLimits(), gate=lambda request: None))
    yield app, served
    app.go.set()
    served.stop()


REQUEST = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"


def test_a_client_that_closes_while_its_request_runs_has_left_but_one_that_only_shut_its_side_has_not(
    asked: tuple[_Asked, Served],
) -> None:
    """The first is what stops a job when its client hangs up (the 2026-07-28 cancel signal); a read shows both
    alike, the probe's reset tells them apart."""
    app, served = asked
    half = socket.create_connection(served.address, timeout=10)
    half.sendall(REQUEST)
    half.shutdown(socket.SHUT_WR)
    app.go.set()
    assert app.asked.wait(10)
    assert half.recv(65536).startswith(CONTINUE)
    half.close()
    app.go.clear()
    app.asked.clear()
    with socket.create_connection(served.address, timeout=10) as gone:
        gone.sendall(REQUEST)
    app.go.set()
    assert app.asked.wait(10)
    assert app.said == [True, False]


def _handed_out(peer: Peer, data: bytes = REQUEST) -> tuple[HttpConversation, Request, Response]:
    """A conversation given one whole request, and that request as its app saw it, run."""
    seen: list[Request] = []

    def app(request: Request) -> Response:
        seen.append(request)
        return Response(200, b"ok")

    conversation = HttpConversation(peer, app=app, limits=HttpLimits(), gate=lambda request: None)
    output = conversation.received(data, 0.0)
    assert output.run is not None
    result = output.run()
    return conversation, seen[0], result


def _peer(sent: list[bytes], *, ended: bool = True, taken: int = 1 << 20, connected: Callable[[], bool]) -> Peer:
    def send(data: bytes) -> int:
        sent.append(data[:taken])
        return min(taken, len(data))

    return Peer(("127.0.0.1", 1), ("127.0.0.1", 2), lambda: ended, lambda: connected(), send)


def test_the_probe_is_written_once_its_rest_before_the_answer_and_the_connection_closes_after() -> None:
    sent: list[bytes] = []
    conversation, request, result = _handed_out(_peer(sent, taken=3, connected=lambda: True))
    assert request.connected() and request.connected()
    assert b"".join(sent) == CONTINUE[:6]  # the socket took 3 bytes at each try
    answer = conversation.answered(result, 0.0)
    assert answer.data.startswith(CONTINUE[6:] + b"HTTP/1.1 200 ") and answer.close


def test_no_probe_once_the_answer_has_begun_and_a_reset_means_left() -> None:
    sent: list[bytes] = []
    alive = [True]
    _, request, _ = _handed_out(_peer(sent, connected=lambda: alive[0]))
    assert request.send(b"head") == 4
    assert request.connected() and sent == [b"head"]
    alive[0] = False
    assert not request.connected()


def test_an_http_1_0_client_is_never_written_an_interim_answer() -> None:
    sent: list[bytes] = []
    _, request, _ = _handed_out(_peer(sent, connected=lambda: True), REQUEST.replace(b"HTTP/1.1", b"HTTP/1.0"))
    assert request.connected() and sent == []


def test_the_conversations_hold_no_socket() -> None:
    """The socket helpers live in sockets.py; the modules that only parse and decide import none of that."""
    for name in ("conversation.py", "http.py", "lab_protocol.py"):
        tree = ast.parse((NET / name).read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not imported & {"socket", "select", "selectors", "sockets"}, name
