"""The 2025 era's sessions, over real sockets: a cancel reaches only its own session's request, and a session
ended by DELETE is gone (net/eras.py `Handshake`, net/mcp_http.py `_end_session`)."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Endpoint, start_endpoint

pytestmark = pytest.mark.timeout(60)


def _session(endpoint: Endpoint) -> dict[str, str]:
    """A new 2025 session: the header every later request of it carries."""
    status, headers, _ = endpoint.rpc("initialize", {"protocolVersion": "2025-11-25"}, modern=False)
    assert status == 200
    return {"Mcp_Session_Id": headers["mcp-session-id"]}


def _delete(endpoint: Endpoint, session_id: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=10)
    try:
        conn.request("DELETE", "/mcp", headers=endpoint.headers(Mcp_Session_Id=session_id))
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.fixture
def threaded_endpoint() -> Iterator[Endpoint]:
    """The GUI's driver: it reads a cancel while a job runs (the main loop reads it only after the job)."""
    endpoint = start_endpoint(driver="threads")
    yield endpoint
    endpoint.listener.stop()


def test_a_cancel_from_another_session_naming_the_same_id_leaves_the_request_running(
    threaded_endpoint: Endpoint,
) -> None:
    """Request ids are the client's own: two sessions may both use "long", and one's cancel must not stop the
    other's work."""
    endpoint = threaded_endpoint
    owner, stranger = _session(endpoint), _session(endpoint)
    call = {
        "jsonrpc": "2.0",
        "id": "long",
        "method": "tools/call",
        "params": {"name": "steps", "arguments": {"steps": 30, "pause": 0.1}},
    }
    answers: list[Any] = []
    running = threading.Thread(target=lambda: answers.append(endpoint.post(call, endpoint.headers(**owner))))
    running.start()
    while not endpoint.tools.calls:
        threading.Event().wait(0.01)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long"}}
    assert endpoint.post(cancel, endpoint.headers(**stranger))[0] == 202
    assert running.is_alive()  # the stranger's cancel came while the request ran
    running.join(30)
    [(status, _, body)] = answers
    assert status == 200 and body["result"]["isError"] is False, json.dumps(body)
    assert body["result"]["structuredContent"] == {"steps": 30}


def test_delete_of_an_unknown_session_is_404_and_of_a_known_one_204_after_which_it_is_unknown(
    endpoint: Endpoint,
) -> None:
    assert _delete(endpoint, "never-issued") == 404
    session = _session(endpoint)
    assert _delete(endpoint, session["Mcp_Session_Id"]) == 204
    assert _delete(endpoint, session["Mcp_Session_Id"]) == 404
    status, _, _ = endpoint.rpc("tools/list", modern=False, **session)
    assert status == 404
