"""The toolkit's one transport (hermes_blender/transport.py): which connection it keeps, what it sends again, how
long it waits.

A kept connection the bridge closed while idle (its idle timeout, room at its cap) or wrote to unasked is never
reused; a request met by such a close in flight is sent once more on a new connection (the bridge never closes one
after a request passed its gate without answering, so that request never ran); an answer that says
`Connection: close` is the connection's last; a restart on the same port with a new token gets a new link; an
answer may take its tool's limit while bytes keep coming, but not stay silent. These run against the bridge's own
HTTP conversation in this process, or a scripted loopback server for what the bridge does not do on cue. The "is it
this user's Blender" check is stepped over where the server is this test process (`unchecked`); it is held below,
in tests/agent/test_relay.py and tests/e2e/test_trust.py.
"""

from __future__ import annotations

import json
import os
import resource
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from blender_addon.net.http import HttpLimits
from hermes_blender import time_limits, transport
from hermes_blender.contract.liveness import LiveEndpoint
from hermes_blender.contract.redact import Secret
from hermes_blender.errors import LiveEndpointUnavailable, ToolCallFailed
from hermes_blender.transport import AnswerOverdue, BridgeLink, BridgeSilent, Links, OnProgress
from tests.net.conftest import Endpoint, start_endpoint
from tests.scripted_bridge import STREAM_HEAD, Answer, Request, ScriptedBridge, event, json_answer

pytestmark = pytest.mark.timeout(60)
TOKEN = "transport-test-token-0123456789"


@pytest.fixture
def unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport, "require_own_blender", lambda endpoint: None)


@pytest.fixture
def quick_to_close(request: pytest.FixtureRequest, unchecked: None) -> Iterator[Endpoint]:
    """A bridge that closes a kept connection 0.2 s after its last answer."""
    endpoint = start_endpoint(HttpLimits(idle_timeout=0.2), driver=request.param)
    yield endpoint
    endpoint.listener.stop()


def _live(port: int, token: str = TOKEN) -> LiveEndpoint:
    return LiveEndpoint(f"http://127.0.0.1:{port}/mcp", Secret(token), 1, Path("server.json"))


def _link(endpoint: Endpoint) -> BridgeLink:
    return BridgeLink(LiveEndpoint(f"http://127.0.0.1:{endpoint.port}/mcp", endpoint.token, 1, Path("server.json")))


def _closed_by_the_bridge(endpoint: Endpoint) -> None:
    while endpoint.listener.connection_count:
        time.sleep(0.01)


def _echo(n: int) -> dict[str, object]:
    return {"name": "echo", "arguments": {"n": n}}


def _answer_echo(conn: socket.socket, request: Request, extra: str = "") -> None:
    conn.sendall(json_answer(request, {"echo": request.body["params"]["arguments"]}, extra=extra))


def _two_calls(
    answer: Answer, between: threading.Event | None = None, *, loop_looks: bool = True
) -> tuple[list[object], list[tuple[int, int]]]:
    """Two calls on one link to a server that answers as `answer` does, the second after `between` is set: their
    answers, and each request the server read (its connection, which call it was). `loop_looks=False`: the event
    loop gets no turn in between, so what the server sent meanwhile is in the socket only."""
    server = ScriptedBridge(answer)

    async def calls() -> list[object]:
        link = BridgeLink(_live(server.port))
        try:
            first = await link.request("tools/call", _echo(1))
            if between is not None and loop_looks:
                await anyio.to_thread.run_sync(between.wait, 10)
                await anyio.sleep(0.05)  # the close's FIN on its way through loopback
            elif between is not None:
                between.wait(10)
                time.sleep(0.05)
            second = await link.request("tools/call", _echo(2))
        finally:
            await link.close()
        return [first["echo"], second["echo"]]

    try:
        answers = anyio.run(calls)
    finally:
        server.close()
    return answers, [(r.connection, r.body["params"]["arguments"]["n"]) for r in server.requests]


ANSWERED_ON_A_NEW_CONNECTION = ([{"n": 1}, {"n": 2}], [(0, 1), (1, 2)])


@pytest.mark.parametrize("quick_to_close", ["threads", "main-loop"], indirect=True)
def test_a_call_after_the_bridge_closed_the_kept_connection_is_answered(quick_to_close: Endpoint) -> None:
    async def calls() -> list[object]:
        link = _link(quick_to_close)
        try:
            first = await link.request("tools/call", _echo(1))
            await anyio.to_thread.run_sync(_closed_by_the_bridge, quick_to_close)
            second = await link.request("tools/call", _echo(2))
        finally:
            await link.close()
        return [first["structuredContent"], second["structuredContent"]]

    assert anyio.run(calls) == [{"echo": {"n": 1}}, {"echo": {"n": 2}}]
    assert [name for name, _ in quick_to_close.tools.calls] == ["echo", "echo"]  # each ran once


def test_a_kept_connection_the_server_closed_while_idle_is_expired_before_reuse(unchecked: None) -> None:
    """The server shuts its side after 0.1 s idle and still reads: a request sent into that connection would reach
    it, unanswered. The next call must go on a new connection only, read once."""
    closed = threading.Event()

    def answer(conn: socket.socket, request: Request) -> bool:
        _answer_echo(conn, request)
        if request.connection == 0:
            time.sleep(0.1)
            conn.shutdown(socket.SHUT_WR)
            closed.set()
        return True

    assert _two_calls(answer, closed) == ANSWERED_ON_A_NEW_CONNECTION


def test_bytes_a_server_sent_unasked_on_a_kept_connection_are_never_read_as_an_answer(unchecked: None) -> None:
    sent = threading.Event()

    def answer(conn: socket.socket, request: Request) -> bool:
        _answer_echo(conn, request)
        if request.connection == 0:
            conn.sendall(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
            sent.set()
        return True

    assert _two_calls(answer, sent) == ANSWERED_ON_A_NEW_CONNECTION


@pytest.mark.parametrize("unasked", [b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n", b""])
def test_what_came_since_the_event_loop_last_looked_still_expires_a_kept_connection(
    unchecked: None, unasked: bytes
) -> None:
    """Bytes or a close (b"") that reached the socket while the event loop had no turn are not in the
    connection's buffer yet: the socket itself is asked before reuse."""
    sent = threading.Event()

    def answer(conn: socket.socket, request: Request) -> bool:
        _answer_echo(conn, request)
        if request.connection == 0:
            time.sleep(0.2)  # after the answer was read: what follows is in the socket only
            conn.sendall(unasked) if unasked else conn.shutdown(socket.SHUT_WR)
            sent.set()
        return True

    assert _two_calls(answer, sent, loop_looks=False) == ANSWERED_ON_A_NEW_CONNECTION


def test_an_answer_larger_than_a_connection_reads_ahead_arrives_whole(unchecked: None) -> None:
    """Reading pauses while READ_AHEAD bytes wait unasked, and goes on when the answer asks for more."""
    big = "x" * (3 * transport.READ_AHEAD)
    server = ScriptedBridge(lambda conn, request: conn.sendall(json_answer(request, {"text": big})) or True)

    async def call() -> dict[str, object]:
        link = BridgeLink(_live(server.port))
        try:
            with anyio.fail_after(20):  # a reading never resumed would wait for the tool's own limit
                return await link.request("tools/call", _echo(1))
        finally:
            await link.close()

    try:
        assert anyio.run(call)["text"] == big
    finally:
        server.close()


def test_a_request_larger_than_the_sockets_buffers_is_sent_whole(unchecked: None) -> None:
    """Writing waits while the socket's buffers are full (agent code of megabytes), and goes on as they empty."""
    blob = "y" * (16 * 1024 * 1024)
    server = ScriptedBridge(
        lambda conn, request: (
            conn.sendall(json_answer(request, {"n": len(request.body["params"]["arguments"]["blob"])})) or True
        )
    )

    async def call() -> dict[str, object]:
        link = BridgeLink(_live(server.port))
        try:
            with anyio.fail_after(20):  # a write never told to go on would wait for the tool's own limit
                return await link.request("tools/call", {"name": "echo", "arguments": {"blob": blob}})
        finally:
            await link.close()

    try:
        assert anyio.run(call)["n"] == len(blob)
    finally:
        server.close()


def test_a_request_met_by_the_close_of_its_kept_connection_is_sent_once_more_on_a_new_one(unchecked: None) -> None:
    """The close and the request cross: the connection looked idle and open, then closed with no byte of answer."""

    def answer(conn: socket.socket, request: Request) -> bool:
        if (request.connection, request.body["params"]["arguments"]["n"]) == (0, 2):
            return False  # closed without answering: that request never ran
        _answer_echo(conn, request)
        return True

    assert _two_calls(answer) == ([{"n": 1}, {"n": 2}], [(0, 1), (0, 2), (1, 2)])


def test_a_new_connection_closed_before_its_answer_is_a_failure_never_a_second_resend(unchecked: None) -> None:
    server = ScriptedBridge(lambda conn, request: False)
    link = BridgeLink(_live(server.port))
    try:
        with pytest.raises(ToolCallFailed, match="connection to Blender"):
            anyio.run(link.request, "tools/call", _echo(1))
    finally:
        server.close()
    assert [r.connection for r in server.requests] == [0]


@pytest.mark.parametrize(
    "extra", ["Connection: close\r\n", "Connection: keep-alive, Close\r\n", "Connection: close\r\nConnection: x\r\n"]
)
def test_a_connection_whose_answer_said_connection_close_is_never_kept(unchecked: None, extra: str) -> None:
    """The server says it closes, and would still read: the next call goes on a new connection all the same."""

    def answer(conn: socket.socket, request: Request) -> bool:
        _answer_echo(conn, request, extra=extra)
        return True

    assert _two_calls(answer) == ANSWERED_ON_A_NEW_CONNECTION


def test_a_connection_an_http_1_0_answer_came_on_is_never_kept(unchecked: None) -> None:
    """HTTP/1.0 keeps nothing unless asked: the server may close it after this answer."""

    def answer(conn: socket.socket, request: Request) -> bool:
        conn.sendall(
            json_answer(request, {"echo": request.body["params"]["arguments"]}).replace(b"HTTP/1.1", b"HTTP/1.0", 1)
        )
        return True

    assert _two_calls(answer) == ANSWERED_ON_A_NEW_CONNECTION


def _one_call(answer: Answer, *, progress: bool = False, limit: float = 20) -> tuple[object, int]:
    """One call to a server that answers as `answer` does: its result, or the exception it failed with, and how
    many requests the server read."""
    server = ScriptedBridge(answer)

    async def on_progress(params: dict[str, object]) -> None:
        pass

    try:
        outcome = _outcome(server.port, _echo(1), limit=limit, on_progress=on_progress if progress else None)
    finally:
        server.close()
    return outcome, len(server.requests)


def _outcome(
    port: int, params: dict[str, Any], *, limit: float | None = None, on_progress: OnProgress | None = None
) -> object:
    """A tool call on a link of its own: its result, or the exception it failed with."""

    async def call() -> object:
        link = BridgeLink(_live(port), limit=limit)
        try:
            return await link.request("tools/call", params, on_progress)
        except Exception as exc:  # the test looks at what it was
            return exc
        finally:
            await link.close()

    return anyio.run(call)


def _raw(data: bytes) -> Answer:
    def answer(conn: socket.socket, request: Request) -> bool:
        conn.sendall(data)
        return True

    return answer


@pytest.mark.parametrize(
    ("raw", "progress"),
    [
        (b"HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", False),  # a status line without a status
        (b"HTTP/1.1 +200 OK\r\nContent-Length: 38\r\n\r\n" + b'{"jsonrpc":"2.0","id":1,"result":{}}  ', False),
        (b"HTTP/1.1 -20 OK\r\nContent-Length: 2\r\n\r\n{}", False),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n" + b"[" * 200_000, False),  # nested past the parser
        (STREAM_HEAD + b"-1\r\n", True),  # a chunk of a negative size
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n{}", False),  # more than any answer: not awaited
        (STREAM_HEAD + b"7fffffffffff\r\n" + b"x" * 100, True),  # a chunk larger than any event: not awaited
        (STREAM_HEAD + b"a\r\ndata: 7\n\n\r\n0\r\n\r\n", True),  # an event that is not a message
        (STREAM_HEAD + b"b\r\ndata: []\n\n\r\n0\r\n\r\n", True),
    ],
)
def test_an_answer_that_is_not_what_the_bridge_sends_is_a_failure_at_once(
    unchecked: None, raw: bytes, progress: bool
) -> None:
    """Said as a failure of the call (ToolCallFailed, which the relay turns into a state), never a raw exception
    out of the transport, and never a wait for bytes no bridge would send (that would end as AnswerOverdue)."""
    outcome, requests = _one_call(_raw(raw), progress=progress)
    assert isinstance(outcome, ToolCallFailed) and not isinstance(outcome, AnswerOverdue), outcome
    assert requests == 1


@pytest.mark.parametrize("raw", [b"HTTP/1.1 200 OK\r\nX: " + b"y" * (80 * 1024) + b"\r\n\r\n", STREAM_HEAD + b"zz\r\n"])
def test_an_update_stream_that_is_not_what_the_bridge_sends_is_a_failure(unchecked: None, raw: bytes) -> None:
    """A head over 64 KiB or a chunk size that is not one ends the stream as ToolCallFailed, which the relay
    retries later, never as a raw exception."""
    server = ScriptedBridge(_raw(raw))

    async def follow() -> None:
        async def updated(uri: str) -> None:
            raise AssertionError(uri)

        with anyio.fail_after(20):
            await BridgeLink(_live(server.port)).listen(["blender://objects/Cube"], updated)

    try:
        with pytest.raises(ToolCallFailed, match="update stream"):
            anyio.run(follow)
    finally:
        server.close()


def test_a_refusal_the_bridge_sent_before_reading_the_whole_request_is_told_and_never_resent(unchecked: None) -> None:
    """The bridge refuses a body over its limit when it reads the head, answers, and closes: the request's
    writing fails then, and the answer already there is the call's outcome, not a reason to send it again."""
    server = socket.create_server(("127.0.0.1", 0))
    connections: list[int] = []

    def refuse() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            connections.append(1)
            with conn:
                conn.recv(65536)
                body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"the request body is too large"}}'
                conn.sendall(
                    b"HTTP/1.1 413 Too Large\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
                )
                conn.shutdown(socket.SHUT_WR)
                time.sleep(0.2)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset: unread bytes

    threading.Thread(target=refuse, daemon=True).start()

    try:
        outcome = _outcome(server.getsockname()[1], {"name": "echo", "arguments": {"blob": "z" * (32 * 1024 * 1024)}})
    finally:
        server.close()
    assert isinstance(outcome, MCPError) and "too large" in str(outcome), outcome
    assert connections == [1]


def test_a_request_given_up_while_its_bytes_still_go_out_never_reaches_the_bridge_whole(unchecked: None) -> None:
    """A bridge that stopped reading (a hung Blender) gets a hang-up when the request's limit passes: what this
    process still held of the request is dropped, not flushed to it after the caller gave up."""
    server = socket.create_server(("127.0.0.1", 0))
    received: list[int] = []
    ended = threading.Event()

    def stall() -> None:
        conn, _ = server.accept()
        with conn:
            total = len(conn.recv(1024))
            time.sleep(2)  # the call's limit (1 s) passes while nothing is read
            while data := conn.recv(1 << 20):
                total += len(data)
        received.append(total)
        ended.set()

    threading.Thread(target=stall, daemon=True).start()
    blob = "z" * (32 * 1024 * 1024)

    async def call() -> None:
        link = BridgeLink(_live(server.getsockname()[1]), limit=1)
        try:
            with pytest.raises(AnswerOverdue):
                await link.request("tools/call", {"name": "echo", "arguments": {"blob": blob}})
        finally:
            await link.close()

    try:
        anyio.run(call)
        assert ended.wait(20)
    finally:
        server.close()
    assert received[0] < len(blob)


def test_a_kept_connection_is_looked_at_where_there_is_no_poll(
    unchecked: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows's select module has no poll(): select() looks there (it has no limit on the descriptor's number)."""
    monkeypatch.delattr(select, "poll")
    sent = threading.Event()

    def answer(conn: socket.socket, request: Request) -> bool:
        _answer_echo(conn, request)
        if request.connection == 0:
            time.sleep(0.2)  # after the answer was read: these bytes are in the socket only
            conn.sendall(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
            sent.set()
        return True

    assert _two_calls(answer, sent, loop_looks=False) == ANSWERED_ON_A_NEW_CONNECTION


@pytest.mark.skipif(not hasattr(select, "poll"), reason="POSIX poll")
def test_a_kept_connection_numbered_past_1024_is_still_looked_at_before_reuse(unchecked: None) -> None:
    """select() refuses descriptors from 1024 on, which a relay holding many files reaches."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this system allows {hard} open files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:

        def answer(conn: socket.socket, request: Request) -> bool:
            _answer_echo(conn, request, extra="")
            return request.connection != 0  # the first connection closes after its answer

        assert _two_calls(answer, loop_looks=True) == ([{"n": 1}, {"n": 2}], [(0, 1), (1, 2)])
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_link_is_never_reused_for_a_new_token_on_the_same_port(unchecked: None) -> None:
    """Blender restarted and got the same port back: the old link carries the old token and ends at the old one."""
    server = ScriptedBridge(lambda conn, request: _answer_echo(conn, request) or True)
    links = Links()

    async def calls() -> None:
        try:
            for n, token in ((1, TOKEN), (2, "restarted-token-0123456789")):
                link = await links.link_to(_live(server.port, token))
                await link.request("tools/call", _echo(n))
        finally:
            await links.close()

    try:
        anyio.run(calls)
    finally:
        server.close()
    assert [(r.connection, r.token) for r in server.requests] == [(0, TOKEN), (1, "restarted-token-0123456789")]


def _streaming(events: int, every: float, then_silent: float = 0.0) -> ScriptedBridge:
    """A server that answers with a stream: a progress event every `every` s, then the answer (or a silence)."""

    def answer(conn: socket.socket, request: Request) -> bool:
        conn.sendall(STREAM_HEAD)
        token = request.body["params"]["_meta"]["progressToken"]
        for n in range(1, events + 1):
            time.sleep(every)
            progress = {"progressToken": token, "progress": n, "message": f"frame {n}"}
            conn.sendall(event({"method": "notifications/progress", "params": progress}))
        time.sleep(then_silent)
        conn.sendall(event({"id": request.body["id"], "result": {"frames": events}}) + b"0\r\n\r\n")
        return True

    return ScriptedBridge(answer)


def test_a_streamed_answer_whose_progress_keeps_coming_outlasts_the_inactivity_timeout(unchecked: None) -> None:
    """Progress every 0.2 s for 2 s, an inactivity timeout of 0.5 s: each event restarts the wait."""
    server = _streaming(events=10, every=0.2)
    heard: list[str] = []

    async def hear(params: dict[str, object]) -> None:
        heard.append(str(params["message"]))

    async def call() -> dict[str, object]:
        link = BridgeLink(_live(server.port), inactivity=0.5)
        try:
            return await link.request("tools/call", _echo(1), hear)
        finally:
            await link.close()

    started = time.monotonic()
    try:
        result = anyio.run(call)
    finally:
        server.close()
    assert result == {"frames": 10} and heard == [f"frame {n}" for n in range(1, 11)]
    assert time.monotonic() - started >= 2.0


def test_a_streamed_answer_as_large_as_a_whole_answer_arrives_whole(unchecked: None) -> None:
    """A call asked with progress gets its result as the stream's last event: a picture of 20 MiB (a window's
    screenshot with no size limit) comes through as it would without progress."""
    picture = "p" * (20 * 1024 * 1024)

    def answer(conn: socket.socket, request: Request) -> bool:
        result = {"jsonrpc": "2.0", "id": request.body["id"], "result": {"picture": picture}}
        data = b"data: " + json.dumps(result).encode() + b"\n\n"
        conn.sendall(STREAM_HEAD + b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
        return True

    async def on_progress(params: dict[str, object]) -> None:
        pass

    server = ScriptedBridge(answer)
    try:
        outcome = _outcome(server.port, _echo(1), on_progress=on_progress)
    finally:
        server.close()
    assert isinstance(outcome, dict) and outcome["picture"] == picture, outcome


def _failing_call(
    server: ScriptedBridge, failure: type[Exception], match: str, *, streamed: bool = True, **options: float
) -> float:
    """Seconds until a call (asking for progress when `streamed`) on a link made with `options` failed as `failure`."""

    async def call() -> None:
        link = BridgeLink(_live(server.port), **options)
        try:
            await link.request("tools/call", _echo(1), (lambda params: anyio.sleep(0)) if streamed else None)
        finally:
            await link.close()

    started = time.monotonic()
    try:
        with pytest.raises(failure, match=match):
            anyio.run(call)
    finally:
        server.close()
    return time.monotonic() - started


def test_an_answer_silent_for_longer_than_the_inactivity_timeout_fails_as_bridge_silent(unchecked: None) -> None:
    server = _streaming(events=1, every=0.0, then_silent=10.0)
    match = r"sent nothing for 0\.5 s while tools/call echo was due"
    assert _failing_call(server, BridgeSilent, match, inactivity=0.5) < 3.0


def _silent(conn: socket.socket, request: Request) -> bool:
    time.sleep(10.0)
    return False


@pytest.mark.parametrize(
    ("talking", "inactivity", "limit"),
    [(True, 0.5, 1.0), (False, 5.0, 0.5)],
    ids=["progress-every-0.2-s-for-4-s", "silent-from-the-start-within-its-inactivity"],
)
def test_a_streamed_answer_past_the_requests_limit_fails_as_overdue(
    unchecked: None, talking: bool, inactivity: float, limit: float
) -> None:
    """Bytes keep the silence away, never the limit: the tool's own, or here the caller's."""
    server = _streaming(events=20, every=0.2, then_silent=10.0) if talking else ScriptedBridge(_silent)
    match = rf"did not finish tools/call echo within {limit:g} s, its limit"
    assert _failing_call(server, AnswerOverdue, match, inactivity=inactivity, limit=limit) < limit + 1.0


def test_a_whole_answer_later_than_the_requests_limit_fails_as_overdue(unchecked: None) -> None:
    match = r"did not finish tools/call echo within 0\.5 s"
    assert _failing_call(ScriptedBridge(_silent), AnswerOverdue, match, streamed=False, limit=0.5) < 3.0


def test_a_tools_own_limit_bounds_its_call() -> None:
    render = time_limits.limit_of("tools/call", {"name": "render_frames_to_folder"})
    summary = time_limits.limit_of("tools/call", {"name": "get_objects_summary"})
    assert render == 3600.0 + time_limits.MARGIN and summary == time_limits.limit_of("tools/list", {}) == 150.0


def test_the_limits_are_the_addons_own() -> None:
    from blender_addon import execution
    from blender_addon.tools.catalogue import CATALOGUE

    assert (time_limits.JOB_LIMIT, time_limits.DEFERRED_LIMIT) == (execution.JOB_TIMEOUT, execution.DEFERRED_LIMIT)
    declared = {name: tool.time_limit for name, tool in CATALOGUE.items() if tool.time_limit}
    assert declared == {k: v for k, v in time_limits.LONG_WORK.items() if k != "execute_blender_code"}


def test_the_relay_follows_at_most_what_one_of_the_addons_streams_may_name() -> None:
    from blender_addon.net import subscriptions
    from hermes_blender import stdio_server

    assert stdio_server.MAX_FOLLOWED == subscriptions.MAX_URIS


@pytest.mark.parametrize("driver", ["threads", "main-loop"])
def test_every_new_connection_is_dialled_only_after_the_process_is_checked_again(
    driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blender died after the link was made and another user's process took its pid and port: the next new
    connection (here the one after the kept one closed) must not be dialled, the token never sent."""
    endpoint = start_endpoint(HttpLimits(idle_timeout=0.2), driver=driver)
    verdicts = iter([None, "pid 42 runs as uid 1001, not as uid 0"])

    def check(live: LiveEndpoint) -> None:
        if (problem := next(verdicts)) is not None:
            raise LiveEndpointUnavailable(problem, state="endpoint_unavailable")

    monkeypatch.setattr(transport, "require_own_blender", check)

    async def calls() -> None:
        link = _link(endpoint)
        try:
            await link.request("tools/call", _echo(1))  # the first check: its connection
            await anyio.to_thread.run_sync(_closed_by_the_bridge, endpoint)
            await link.request("tools/call", _echo(2))
        finally:
            await link.close()

    try:
        with pytest.raises(LiveEndpointUnavailable, match="runs as uid 1001"):
            anyio.run(calls)
    finally:
        endpoint.listener.stop()
    assert [arguments for _, arguments in endpoint.tools.calls] == [{"n": 1}]
