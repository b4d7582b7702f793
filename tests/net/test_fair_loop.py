"""Fairness under both drivers: no request that arrived is dropped, no client's pipeline or unread answers
cost anyone else, and a connection with a request in flight is never closed for room."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from blender_addon.net.http import HttpLimits
from blender_addon.net.lab_protocol import LabConversation, LabSettings

from .conftest import MODERN_META, Endpoint, modern_headers, start_endpoint
from .drivers import Served


def _body(name: str, arguments: dict[str, Any], request_id: int = 1) -> bytes:
    params = {"name": name, "arguments": arguments, "_meta": MODERN_META}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


def _call(conn: http.client.HTTPConnection, endpoint: Endpoint, name: str, **arguments: Any) -> dict[str, Any]:
    """One tools/call on a kept connection; the structured result."""
    params = {"name": name, "arguments": arguments}
    conn.request(
        "POST", "/mcp", body=_body(name, arguments), headers=endpoint.headers(**modern_headers("tools/call", params))
    )
    response = conn.getresponse()
    payload = json.loads(response.read())
    assert response.status == 200, payload
    return payload["result"]["structuredContent"]


def _raw_request(endpoint: Endpoint, name: str, request_id: int = 1, **arguments: Any) -> bytes:
    body = _body(name, arguments, request_id)
    headers = endpoint.headers(**modern_headers("tools/call", {"name": name}), Content_Length=str(len(body)))
    return "".join(f"{k}: {v}\r\n" for k, v in headers.items()).join(["POST /mcp HTTP/1.1\r\n", "\r\n"]).encode() + body


def _in_background(fn: Any) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def patient(driver: str) -> Iterator[Endpoint]:
    """A one-second idle limit for known clients, so a job of 1.5 s outlasts it."""
    endpoint = start_endpoint(HttpLimits(idle_timeout=1.0), driver=driver)
    yield endpoint
    endpoint.listener.stop()


def test_a_request_sent_while_another_clients_job_runs_is_answered_even_past_its_idle_limit(patient: Endpoint) -> None:
    kept = http.client.HTTPConnection("127.0.0.1", patient.port, timeout=10)
    assert _call(kept, patient, "echo", n=1) == {"echo": {"n": 1}}  # known now; idle from here, for at most 1 s
    other = http.client.HTTPConnection("127.0.0.1", patient.port, timeout=10)
    assert _call(other, patient, "echo", n=0)  # known too: its long job is read with the others, not at an accept
    job = _in_background(lambda: _call(other, patient, "sleep", seconds=1.5))
    time.sleep(0.5)  # within its idle limit: the request is in the kernel before the limit passes
    assert _call(kept, patient, "echo", n=2) == {"echo": {"n": 2}}
    job.join(10)
    kept.close()
    other.close()


def test_the_idle_limit_counts_from_the_answer_not_from_the_request(patient: Endpoint) -> None:
    kept = http.client.HTTPConnection("127.0.0.1", patient.port, timeout=10)
    assert _call(kept, patient, "sleep", seconds=1.2) == {"slept": 1.2}  # longer than the idle limit
    assert _call(kept, patient, "echo", n=2) == {"echo": {"n": 2}}  # the same connection, still open
    kept.close()


class _SlowLab:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def run_lab_code(self, code: str, strict_json: bool, connected: Any) -> dict[str, Any]:
        if code == "sleep":
            time.sleep(1.5)
        self.ran.append(code)
        return {"status": "ok", "result": code}


def _lab_request(code: str) -> bytes:
    return json.dumps({"type": "execute", "code": code, "strict_json": True}).encode() + b"\0"


def _lab_answer(sock: socket.socket) -> dict[str, Any]:
    data = b""
    while not data.endswith(b"\0") and (chunk := sock.recv(65536)):
        data += chunk
    return json.loads(data[:-1])


def test_a_lab_client_accepted_before_a_long_job_is_answered_after_it(driver: str) -> None:
    executor = _SlowLab()
    lab = Served(driver, partial(LabConversation, executor=executor, settings=LabSettings(request_timeout=1.0)))
    try:
        port = lab.address[1]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as early:
            time.sleep(0.1)  # accepted now; its 1 s to send a request starts
            with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
                time.sleep(0.1)  # accepted too: its request is read with the others, not at its accept
                slow.sendall(_lab_request("sleep"))
                time.sleep(0.4)  # the long job has begun
                early.sendall(_lab_request("early"))  # within its second, while the job runs
                assert _lab_answer(early) == {"status": "ok", "result": "early"}
                assert _lab_answer(slow) == {"status": "ok", "result": "sleep"}
    finally:
        lab.stop()


def test_a_kept_connection_whose_request_waits_unread_is_never_closed_for_room(driver: str) -> None:
    """At the cap, while a job holds the loop: the known client sends, a stranger connects; the known one is
    answered (the stranger gets room from a connection that waits with nothing asked)."""
    endpoint = start_endpoint(max_connections=2, driver=driver)
    try:
        for _ in range(3):
            kept = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
            assert _call(kept, endpoint, "echo", n=1)
            other = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
            job = _in_background(lambda other=other: _call(other, endpoint, "sleep", seconds=0.6))
            time.sleep(0.2)
            sent = _in_background(lambda kept=kept: _call(kept, endpoint, "echo", n=2))
            time.sleep(0.1)
            with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as stranger:
                stranger.sendall(b"GET /nothing HTTP/1.1\r\n\r\n")
                sent.join(10)
                job.join(10)
            assert ("echo", {"n": 2}) in endpoint.tools.calls, "the known client's request was lost"
            endpoint.tools.calls.clear()
            kept.close()
            other.close()
            # The next round starts at the cap's bottom: until the server has seen these three go, a new connection
            # could find the cap full of them (the threads driver notices a close on each connection's own thread).
            while endpoint.listener.connection_count:
                time.sleep(0.01)
    finally:
        endpoint.listener.stop()


def test_at_the_cap_the_oldest_idle_known_connection_makes_room_and_the_newer_one_stays(driver: str) -> None:
    endpoint = start_endpoint(max_connections=2, driver=driver)
    try:
        oldest = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
        assert _call(oldest, endpoint, "echo", n=1)
        newer = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
        assert _call(newer, endpoint, "echo", n=2)
        third = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
        assert _call(third, endpoint, "echo", n=3)  # room was made for it
        assert oldest.sock is not None and oldest.sock.recv(1) == b""  # the oldest was closed for it
        newer.sock.settimeout(0.2)  # type: ignore[union-attr]
        with pytest.raises(TimeoutError):
            newer.sock.recv(1)  # type: ignore[union-attr]  # the newer one is still open, waiting
        assert _call(newer, endpoint, "echo", n=4)
        for conn in (oldest, newer, third):
            conn.close()
    finally:
        endpoint.listener.stop()


def test_a_pipeline_runs_one_request_per_turn_so_another_client_is_not_kept_waiting(driver: str) -> None:
    endpoint = start_endpoint(driver=driver)
    try:
        with socket.create_connection(("127.0.0.1", endpoint.port), timeout=30) as greedy:
            greedy.sendall(b"".join(_raw_request(endpoint, "sleep", n, seconds=0.02) for n in range(40)))
            time.sleep(0.1)
            honest = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=30)
            assert _call(honest, endpoint, "echo", n="honest")
            names = [name for name, _ in endpoint.tools.calls]
            assert names.index("echo") < 20, f"the honest call waited behind {names.index('echo')} of the pipeline"
            honest.close()
    finally:
        endpoint.listener.stop()


def test_a_client_that_does_not_read_its_answers_gets_no_more_of_its_pipeline_run(driver: str) -> None:
    endpoint = start_endpoint(driver=driver)
    try:
        greedy = socket.socket()
        greedy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: no autotuning
        greedy.settimeout(10)
        greedy.connect(("127.0.0.1", endpoint.port))
        with greedy:
            greedy.sendall(b"".join(_raw_request(endpoint, "big", n, size=1_000_000) for n in range(50)))
            honest = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
            assert _call(honest, endpoint, "echo", n="honest")
            time.sleep(0.5)  # time enough for a driver that runs the whole pipeline to show it
            big = sum(1 for name, _ in endpoint.tools.calls if name == "big")
            assert big <= 10, f"{big} answers of 1 MB were made for a client that reads none"
            honest.close()
    finally:
        endpoint.listener.stop()
