"""HTTP framing under bad input: every case gets a clear answer and the endpoint keeps serving."""

from __future__ import annotations

import http.client
import socket
import time
from typing import Any

import h11
import pytest

from .conftest import Endpoint


def _still_serving(endpoint: Endpoint) -> None:
    status, _, body = endpoint.rpc("tools/call", {"name": "echo", "arguments": {"x": 1}})
    assert status == 200 and body["result"]["structuredContent"] == {"echo": {"x": 1}}


def _head(endpoint: Endpoint, length: int | str, extra: str = "") -> bytes:
    token = endpoint.token.reveal()
    return (
        f"POST /mcp HTTP/1.1\r\nHost: {endpoint.host}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n{extra}\r\n"
    ).encode()


def test_oversize_body_is_413_before_it_is_read(strict_endpoint: Endpoint) -> None:
    reply = strict_endpoint.raw(_head(strict_endpoint, 10_000_000))
    assert reply.startswith(b"HTTP/1.1 413 ")
    assert b"limit of 1024 bytes" in reply
    _still_serving(strict_endpoint)


def test_truncated_body_gets_a_400_answer_and_runs_nothing(strict_endpoint: Endpoint) -> None:
    with socket.create_connection(("127.0.0.1", strict_endpoint.port), timeout=5) as sock:
        sock.sendall(_head(strict_endpoint, 200) + b'{"jsonrpc":"2.0","id":1,"method":"tools/call"')
        sock.shutdown(socket.SHUT_WR)
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 400 ") and b"nothing was run" in reply
    assert strict_endpoint.tools.calls == []
    _still_serving(strict_endpoint)


def test_slow_client_gets_408_and_others_are_served_meanwhile(strict_endpoint: Endpoint) -> None:
    with socket.create_connection(("127.0.0.1", strict_endpoint.port), timeout=5) as slow:
        slow.sendall(_head(strict_endpoint, 100)[:20])  # then stall
        _still_serving(strict_endpoint)
        reply = slow.recv(4096)
    assert reply.startswith(b"HTTP/1.1 408 ")


def test_malformed_request_line_and_headers_are_400(endpoint: Endpoint) -> None:
    assert endpoint.raw(b"NONSENSE\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert endpoint.raw(b"POST /mcp HTTP/1.1\r\nbad header line\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert endpoint.raw(b"\x00\xff\xfe binary \r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert endpoint.raw(_head(endpoint, "12abc")).startswith(b"HTTP/1.1 400 ")
    _still_serving(endpoint)


def test_oversize_headers_are_431(strict_endpoint: Endpoint) -> None:
    reply = strict_endpoint.raw(b"POST /mcp HTTP/1.1\r\nX-Pad: " + b"a" * 4000 + b"\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 431 ")
    _still_serving(strict_endpoint)


def test_chunked_bodies_are_refused_with_a_reason(endpoint: Endpoint) -> None:
    token = endpoint.token.reveal()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: {endpoint.host}\r\nAuthorization: Bearer {token}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ).encode()
    reply = endpoint.raw(head)
    assert reply.startswith(b"HTTP/1.1 501 ") and b"Content-Length" in reply


def test_keep_alive_serves_many_requests_on_one_connection(endpoint: Endpoint) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=5)
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
    for _ in range(20):
        headers = endpoint.headers(MCP_Protocol_Version="2026-07-28", Mcp_Method="tools/list")
        conn.request("POST", "/mcp", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        assert response.status == 200
    assert endpoint.listener.connection_count == 1
    conn.close()


def test_stop_closes_idle_connections_and_joins_their_threads(endpoint: Endpoint) -> None:
    idle = socket.create_connection(("127.0.0.1", endpoint.port), timeout=5)
    deadline = time.monotonic() + 5
    while endpoint.listener.connection_count < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    endpoint.listener.stop()
    assert idle.recv(10) == b""  # the server closed it
    assert endpoint.listener.connection_count == 0
    idle.close()


def test_more_header_fields_than_the_limit_are_431_before_any_is_parsed(endpoint: Endpoint) -> None:
    reply = endpoint.raw(_head(endpoint, 0, extra="X-Many: a\r\n" * 200))
    assert reply.startswith(b"HTTP/1.1 431 ") and b"more than 100 header fields" in reply
    _still_serving(endpoint)


@pytest.mark.parametrize("digits", ["9" * 5000, "0" * 5000 + "9" * 12], ids=["nines", "leading zeros"])
def test_a_content_length_of_thousands_of_digits_is_413_not_a_crash(
    endpoint: Endpoint, caplog: Any, digits: str
) -> None:
    reply = endpoint.raw(_head(endpoint, digits))
    assert reply.startswith(b"HTTP/1.1 413 ") and b"exceeds the limit" in reply
    assert not [record for record in caplog.records if record.exc_info], "a traceback was logged"
    _still_serving(endpoint)


def test_a_content_length_with_thousands_of_leading_zeros_is_read_as_its_number(
    endpoint: Endpoint, caplog: Any
) -> None:
    reply = endpoint.raw(_head(endpoint, "0" * 5000 + "2") + b"{}")
    assert reply.startswith(b"HTTP/1.1 ") and not reply.startswith(b"HTTP/1.1 5"), reply[:200]
    assert not [record for record in caplog.records if record.exc_info], "a traceback was logged"
    _still_serving(endpoint)


def test_head_gets_its_answer_without_a_body_and_the_connection_stays_in_step(endpoint: Endpoint) -> None:
    """RFC 9110 §9.3.2; h11 reads both answers on one connection only if the HEAD answer has no body."""
    client = h11.Connection(h11.CLIENT)
    headers = [(k, v) for k, v in endpoint.headers().items()]
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=5) as sock:
        sock.sendall(client.send(h11.Request(method="HEAD", target="/mcp", headers=headers)))
        sock.sendall(client.send(h11.EndOfMessage()))
        head = _next_response(client, sock)
        assert head[0].status_code == 405 and head[1] == b""
        client.start_next_cycle()
        post_headers = [*headers, ("Content-Length", str(len(body)))]
        sock.sendall(client.send(h11.Request(method="POST", target="/mcp", headers=post_headers)))
        sock.sendall(client.send(h11.Data(data=body)) + client.send(h11.EndOfMessage()))
        status = _next_response(client, sock)[0].status_code
    assert status == 400  # a session-era request without its session: an answer, in step


def test_a_204_carries_no_content_length(endpoint: Endpoint) -> None:
    status, headers, _ = endpoint.rpc(
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        modern=False,
    )
    session = headers["mcp-session-id"]
    delete = f"DELETE /mcp HTTP/1.1\r\nHost: {endpoint.host}\r\nAuthorization: Bearer {endpoint.token.reveal()}\r\n"
    reply = endpoint.raw(f"{delete}Mcp-Session-Id: {session}\r\nConnection: close\r\n\r\n".encode())
    assert reply.startswith(b"HTTP/1.1 204 ") and b"content-length" not in reply.lower()


def test_the_apps_400_closes_the_connection(endpoint: Endpoint) -> None:
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=5) as sock:
        sock.sendall(_head(endpoint, 9) + b"not json!")
        reply = b""
        while chunk := sock.recv(4096):  # ends only because the bridge closes
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 400 ") and b"Connection: close" in reply


def test_a_request_half_sent_when_the_bridge_stops_is_closed_without_blaming_the_client(endpoint: Endpoint) -> None:
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=5) as sock:
        sock.sendall(_head(endpoint, 100)[:30])
        time.sleep(0.2)  # read by the bridge
        endpoint.listener.stop()
        assert sock.recv(4096) == b""
    assert endpoint.tools.calls == []


def _next_response(client: h11.Connection, sock: socket.socket) -> tuple[h11.Response, bytes]:
    response, body = None, b""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(sock.recv(65536))
        elif isinstance(event, h11.Response):
            response = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert response is not None
            return response, body


def test_a_content_length_past_the_limit_with_as_many_digits_is_413_before_the_body(strict_endpoint: Endpoint) -> None:
    """1025 against a limit of 1024: no digit count tells them apart, only the value does."""
    reply = strict_endpoint.raw(_head(strict_endpoint, 1025))
    assert reply.startswith(b"HTTP/1.1 413 ") and b"limit of 1024 bytes" in reply


def test_a_header_block_without_its_blank_line_is_refused_once_it_passes_the_limit(strict_endpoint: Endpoint) -> None:
    """Before any token is seen: a stranger's unended header block never grows past the limit in memory."""
    with socket.create_connection(("127.0.0.1", strict_endpoint.port), timeout=5) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nX-Pad: " + b"a" * 2100)  # the limit is 2048; no blank line, ever
        assert sock.recv(4096).startswith(b"HTTP/1.1 431 ")


def test_a_header_name_with_a_space_inside_is_400(endpoint: Endpoint) -> None:
    reply = endpoint.raw(_head(endpoint, 0, extra="X Pad: 1\r\n"))
    assert reply.startswith(b"HTTP/1.1 400 ") and b"malformed header line" in reply
