"""Progress while a tool runs (an event stream), and a 2025 client's cancel, on both drivers."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from blender_addon.net.event_stream import HEARTBEAT

from .conftest import MODERN_META, Endpoint, modern_headers, start_endpoint

pytestmark = pytest.mark.timeout(60)
EVENT_STREAM = "application/json, text/event-stream"


def _call(endpoint: Endpoint, name: str, arguments: dict[str, Any], *, token: Any = "t1", accept: str = EVENT_STREAM):
    params: dict[str, Any] = {"name": name, "arguments": arguments, "_meta": {"progressToken": token}}
    return endpoint.rpc("tools/call", params, Accept=accept)


def _events(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body, in order (every event is one `data:` line)."""
    messages = []
    for event in text.split("\n\n"):
        if event.strip():
            lines = dict(line.split(": ", 1) for line in event.splitlines())
            assert lines["event"] == "message"
            messages.append(json.loads(lines["data"]))
    return messages


def test_a_call_with_a_progress_token_hears_how_far_it_is_before_its_answer(endpoint: Endpoint) -> None:
    status, headers, body = _call(endpoint, "steps", {"steps": 3, "pause": 0.3})
    assert status == 200 and headers["content-type"] == "text/event-stream"
    *notes, answer = _events(body)
    assert answer["id"] == 1 and answer["result"]["structuredContent"] == {"steps": 3}
    assert notes and all(n["method"] == "notifications/progress" for n in notes)
    params = [n["params"] for n in notes]
    assert {p["progressToken"] for p in params} == {"t1"}
    progress = [p["progress"] for p in params]
    assert progress == sorted(set(progress))  # strictly rising, as the specification requires
    assert any(p["message"].startswith("step ") for p in params)
    for before, after in zip(
        params, params[1:], strict=False
    ):  # a word is sent once; the same again only as a heartbeat
        assert after["message"] != before["message"] or after["progress"] - before["progress"] >= HEARTBEAT - 0.002
    assert all(p["total"] >= p["progress"] for p in params if "total" in p)


def test_a_call_that_says_nothing_for_a_while_hears_a_heartbeat(endpoint: Endpoint) -> None:
    status, _, body = _call(endpoint, "sleep", {"seconds": 1.5})
    *notes, answer = _events(body)
    assert status == 200 and answer["result"]["structuredContent"] == {"slept": 1.5}
    assert [n["params"]["message"] for n in notes if "total" not in n["params"]] == ["running for 1 s"]


def test_without_a_token_or_an_event_stream_reader_the_answer_stays_one_json_body(endpoint: Endpoint) -> None:
    status, headers, body = endpoint.rpc("tools/call", {"name": "sleep", "arguments": {"seconds": 1.2}})
    assert status == 200 and headers["content-type"] == "application/json"
    assert body["result"]["structuredContent"] == {"slept": 1.2}
    status, headers, body = _call(endpoint, "sleep", {"seconds": 1.2}, accept="application/json")
    assert status == 200 and headers["content-type"] == "application/json"
    assert body["result"]["structuredContent"] == {"slept": 1.2}


@pytest.mark.parametrize("token", [True, 1.5, {"a": 1}, [1]])
def test_a_progress_token_that_is_not_a_string_or_an_integer_is_refused_and_nothing_runs(
    endpoint: Endpoint, token: Any
) -> None:
    status, _, body = _call(endpoint, "echo", {"x": 1}, token=token)
    assert status == 400 and body["error"]["code"] == -32602 and "progressToken" in body["error"]["message"]
    assert endpoint.tools.calls == []
    status, _, body = endpoint.rpc("tools/call", {"name": "echo", "arguments": {"ok": True}})
    assert status == 200 and body["result"]["structuredContent"] == {"echo": {"ok": True}}


def test_the_connection_serves_the_next_request_after_a_stream(endpoint: Endpoint) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
    try:
        for arguments in ({"steps": 2, "pause": 0.2}, {"steps": 1, "pause": 0.0}):
            params = {"name": "steps", "arguments": arguments, "_meta": {"progressToken": 7}}
            params["_meta"].update(MODERN_META)
            headers = endpoint.headers(Accept=EVENT_STREAM, **modern_headers("tools/call", params))
            conn.request(
                "POST",
                "/mcp",
                json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params}),
                headers,
            )
            response = conn.getresponse()
            *_, answer = _events(response.read().decode())
            assert answer["result"]["structuredContent"] == {"steps": arguments["steps"]}
            assert not response.will_close
    finally:
        conn.close()


@pytest.fixture
def threaded_endpoint() -> Iterator[Endpoint]:
    """The GUI's driver only: the main loop runs a job in place, so it reads a cancel once the job has ended
    (a 2025 client there cancels by hanging up, which the stdio server does: README › Long work)."""
    endpoint = start_endpoint(driver="threads")
    yield endpoint
    endpoint.listener.stop()


def test_a_2025_cancel_stops_the_running_call_and_the_session_goes_on(threaded_endpoint: Endpoint) -> None:
    endpoint = threaded_endpoint
    status, headers, _ = endpoint.rpc("initialize", {"protocolVersion": "2025-06-18"}, modern=False)
    session = {"Mcp_Session_Id": headers["mcp-session-id"]}
    answers: list[Any] = []
    call = {
        "jsonrpc": "2.0",
        "id": "long",
        "method": "tools/call",
        "params": {"name": "steps", "arguments": {"steps": 100, "pause": 0.1}},
    }
    running = threading.Thread(target=lambda: answers.append(endpoint.post(call, endpoint.headers(**session))))
    running.start()
    while not endpoint.tools.calls:
        threading.Event().wait(0.01)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long", "reason": "user"}}
    assert endpoint.post(cancel, endpoint.headers(**session))[0] == 202
    running.join(20)
    [(status, _, body)] = answers
    assert status == 200 and body["result"]["isError"]
    assert json.loads(body["result"]["content"][0]["text"])["state"] == "cancelled"
    ping = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}
    status, _, body = endpoint.post(ping, endpoint.headers(**session))
    assert status == 200 and body["result"]["structuredContent"] == {"echo": {}}


def test_an_http_1_0_client_asking_for_progress_gets_one_json_body(endpoint: Endpoint) -> None:
    params = {"name": "echo", "arguments": {"v": 1}, "_meta": {**MODERN_META, "progressToken": "t"}}
    body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}).encode()
    headers = endpoint.headers(Accept=EVENT_STREAM, **modern_headers("tools/call", params))
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    reply = endpoint.raw(f"POST /mcp HTTP/1.0\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    status_line, _, rest = reply.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 200 OK" and b"Content-Type: application/json" in rest
    assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["result"]["structuredContent"] == {"echo": {"v": 1}}
