"""Property tests: whatever bytes or messages arrive, each gets a well-formed answer and nothing stops."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.types import jsonrpc_message_adapter

from blender_addon.jsontext import RawJson, dumps, encode
from blender_addon.net.lab_protocol import LabConversation, LabSettings, _Incoming

from .conftest import MODERN_META, Endpoint, modern_headers, start_endpoint
from .drivers import Served

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Endpoint]:
    """One endpoint for the whole module, fuzzed through the main-thread loop (every example-based test in this
    folder runs under both drivers); started and stopped here, never at import, so no server outlives the module."""
    endpoint = start_endpoint(driver="main-loop")
    yield endpoint
    endpoint.listener.stop()


@pytest.fixture(scope="module")
def lab() -> Iterator[Served]:
    served = Served(
        "main-loop", partial(LabConversation, executor=_EchoExecutor(), settings=LabSettings(request_timeout=2.0))
    )
    yield served
    served.stop()


def _exchange(port: int, data: bytes, *, half_close: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _serving(endpoint: Endpoint) -> None:
    status, _, body = endpoint.rpc("tools/call", {"name": "echo", "arguments": {"ok": True}})
    assert status == 200 and body["result"]["structuredContent"] == {"echo": {"ok": True}}


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes_to_the_mcp_port_get_an_http_answer(fuzzed: Endpoint, data: bytes) -> None:
    reply = _exchange(fuzzed.port, data)
    if not data:
        assert reply == b""  # nothing was asked
        return
    assert reply.startswith(b"HTTP/1.1 "), "a client that sent bytes got a silent close"
    assert int(reply[9:12]) in (200, 202, 204, 400, 401, 403, 404, 405, 408, 411, 413, 415, 431, 501)


@FUZZ
@given(
    method=st.text(max_size=30)
    | st.sampled_from(["tools/call", "tools/list", "initialize", "server/discover", "ping"]),
    params=json_values,
    request_id=json_values,
    meta=st.booleans(),
)
def test_random_json_rpc_messages_get_a_json_rpc_answer(
    fuzzed: Endpoint, method: str, params: Any, request_id: Any, meta: bool
) -> None:
    if meta and isinstance(params, dict):
        params = {**params, "_meta": MODERN_META}
    status, _, body = fuzzed.post({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    assert status in (200, 202, 400, 404)
    if status != 202:
        assert body["jsonrpc"] == "2.0" and ("result" in body) != ("error" in body)


def test_deeply_nested_json_is_a_parse_error_not_a_crash(fuzzed: Endpoint) -> None:
    status, _, body = fuzzed.post(None, body=b"[" * 200_000 + b"]" * 200_000)
    assert status == 400 and body["error"]["code"] == -32700
    _serving(fuzzed)


def test_the_endpoint_still_serves_after_the_fuzzing(fuzzed: Endpoint) -> None:
    _serving(fuzzed)


class _EchoExecutor:
    def run_lab_code(self, code: str, strict_json: bool, connected: Any) -> dict[str, Any]:
        return {"status": "ok", "result": {"length": len(code)}}


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes_to_the_lab_port_get_a_reply(lab: Served, data: bytes) -> None:
    reply = _exchange(lab.address[1], data)
    if not data.strip():
        assert reply == b""  # only whitespace: nothing was asked
        return
    assert reply, "a client that sent a request got a silent close"
    if reply.startswith(b"HTTP/1.1 400"):
        return
    envelope = json.loads(reply.rstrip(b"\0"))
    assert envelope["status"] in ("ok", "error")


@pytest.mark.parametrize("length", ["²", "¹²", "+5", "-1", "5x"])
def test_a_content_length_that_is_not_ascii_digits_is_a_400_answer(fuzzed: Endpoint, length: str) -> None:
    head = f"POST /mcp HTTP/1.1\r\nHost: {fuzzed.host}\r\nContent-Length: {length}\r\n\r\n".encode("latin-1")
    assert _exchange(fuzzed.port, head).startswith(b"HTTP/1.1 400 ")
    _serving(fuzzed)


def test_the_lab_port_still_serves_after_the_fuzzing(lab: Served) -> None:
    reply = _exchange(lab.address[1], b'{"type":"execute","code":"abc","strict_json":true}\0', half_close=False)
    assert json.loads(reply.rstrip(b"\0")) == {"status": "ok", "result": {"length": 3}}


@settings(max_examples=300, deadline=None)
@given(inner=json_values, outer=st.dictionaries(st.text(max_size=8), json_values, max_size=3))
def test_spliced_json_equals_json_encoded_in_one_piece(inner: Any, outer: dict[str, Any]) -> None:
    spliced = encode({**outer, "result": {"data": RawJson(dumps(inner)), "extra": outer}})
    assert json.loads(spliced) == {**outer, "result": {"data": inner, "extra": outer}}


def test_deeply_nested_json_on_the_lab_port_is_an_error_reply(lab: Served) -> None:
    reply = _exchange(lab.address[1], b'{"a":' * 200_000 + b"1" + b"}" * 200_000 + b"\0", half_close=False)
    assert json.loads(reply.rstrip(b"\0")) == {"status": "error", "message": "Invalid JSON request: nested too deeply"}


@pytest.mark.parametrize("forged", ["\x00raw-json-0\x00", "\x00raw-json-00000000000000000000000000000000-0\x00"])
def test_a_value_shaped_like_a_splice_marker_is_never_replaced(forged: str) -> None:
    payload = {"id": forged, "result": RawJson('{"spliced":true}')}
    assert json.loads(encode(payload)) == {"id": forged, "result": {"spliced": True}}


class _CountingBuffer(bytearray):
    """Counts the bytes each search looks at."""

    examined = 0

    def find(self, sub: Any, start: Any = 0, *args: Any) -> int:  # type: ignore[override]
        self.examined += len(self) - start
        return super().find(sub, start, *args)


def test_a_slow_lab_client_costs_linear_work_not_quadratic() -> None:
    """Sixteen slow 8 MiB clients once cost Blender's main thread 4x: each byte must be looked at once."""
    incoming = _Incoming()
    incoming.buffer = _CountingBuffer()
    chunks, size = 2000, 500
    incoming.buffer += b'{"code": "'
    for _ in range(chunks):
        incoming.buffer += b"x" * size
        assert incoming.nul() == -1 and incoming.first() == 0
    incoming.buffer += b'"}\0'
    assert incoming.nul() == len(incoming.buffer) - 1
    assert incoming.buffer.examined <= 2 * len(incoming.buffer)  # quadratic would be ~1000x this


def test_lone_surrogates_in_an_id_or_a_result_get_an_answer_the_official_sdk_parses(fuzzed: Endpoint) -> None:
    """A lone surrogate (an undecodable file name, say) is U+FFFD in the answer: escaped, pydantic refuses it all."""
    body = b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/call","params":{"name":"echo","arguments":{"s":"\\udce9"},'
    body += b'"_meta":' + json.dumps(MODERN_META).encode() + b"}}"
    status, _, reply = fuzzed.post(None, fuzzed.headers(**modern_headers("tools/call", {"name": "echo"})), body=body)
    assert status == 200 and reply["id"] == "\ufffd"
    assert reply["result"]["structuredContent"] == {"echo": {"s": "\ufffd"}}
    jsonrpc_message_adapter.validate_json(json.dumps(reply))
    _serving(fuzzed)


def test_a_lone_surrogate_in_a_lab_result_gets_a_reply_not_a_dropped_connection(driver: str) -> None:
    class Surrogate:
        def run_lab_code(self, code: str, strict_json: bool, connected: Any) -> dict[str, Any]:
            return {"status": "ok", "result": {"name": "\udce9"}}

    lab = Served(driver, partial(LabConversation, executor=Surrogate(), settings=LabSettings()))
    try:
        reply = _exchange(lab.address[1], b'{"type":"execute","code":"x","strict_json":true}\0', half_close=False)
    finally:
        lab.stop()
    assert json.loads(reply.rstrip(b"\0")) == {"status": "ok", "result": {"name": "\ufffd"}}
