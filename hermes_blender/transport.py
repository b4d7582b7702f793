"""The toolkit's one way to the bridge: `call`, `status` and the stdio relay all send through a `BridgeLink`.

HTTP/1.1 as the bridge speaks it, on asyncio connections of its own (`_Connection`), in the stateless 2026-07-28 form: no session to open (a new
MCP session per call cost 23 ms; the SDK client's round trip on a kept session as much as the stdio hop itself;
httpx's own machinery 0.65 ms of a 2.2 ms relayed call). No other module of hermes_blender dials the bridge's MCP
endpoint, and this one dials only after one check that the pid the runtime file names is this OS user's Blender
owning the port (`_dial`).

The connection policy (README › Decisions): a kept connection that is readable while idle (the bridge closed it
after its idle timeout or to make room, or sent something unasked) is closed, never reused; a request whose reused
connection ended before any byte of an answer is sent once more, on a new connection; an answer that says
`Connection: close` leaves its connection closed; a link serves one endpoint (url, token, pid) and `Links` opens a
new one when the runtime file names another; an answer may stay silent `inactivity` seconds between two bytes
(each progress event restarts the wait) and take its tool's own limit overall (`time_limits`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import select
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import anyio
from mcp.shared.exceptions import MCPError
from mcp.types import ErrorData

from .contract.liveness import LiveEndpoint, require_own_blender
from .errors import LiveEndpointUnavailable, ToolCallFailed
from .protocol import versions
from .surrogates import loads
from .time_limits import SILENCE, limit_of

MAX_HEAD = 64 * 1024
MAX_ANSWER = 256 * 1024 * 1024
"""The longest whole answer read: a picture the tools may make (50 MB) as base64 fits, many times over."""
MAX_EVENT = MAX_ANSWER
"""The longest event of a streamed answer: its last one carries the whole result, as large as a whole answer (a
window's screenshot with no size limit, asked for with progress, passed 16 MiB)."""
READ_AHEAD = 1024 * 1024
"""Bytes a connection takes from its socket before anyone asked for them; past that the bridge waits."""

OnProgress = Callable[[dict[str, Any]], Awaitable[None]]
"""Hears each `notifications/progress` params of a streamed answer (the bridge's progressToken in them)."""
OnNotification = Callable[[dict[str, Any]], Awaitable[None]]
"""Given each notification of an event stream, whole."""


CONVERSATION = uuid.uuid4().hex
"""This process's conversation with the bridge: what the person's "Allow for this conversation" remembers (one
`hermes-blender mcp` relay, so one agent session)."""


def modern_request(method: str, params: dict[str, Any], request_id: int = 1) -> tuple[bytes, dict[str, str]]:
    """One 2026-07-28 JSON-RPC request: the body with its `_meta` envelope, and the headers that mirror it (the
    bridge rejects a request whose headers and body disagree). Also for raw callers: scripts, benchmarks, tests,
    clients in other languages reading this as an example."""
    given = params.get("_meta", {})
    meta = {
        versions.META_PROTOCOL_VERSION: versions.STATELESS,
        versions.META_CLIENT_CAPABILITIES: given.get(versions.META_CLIENT_CAPABILITIES, {}),  # none, unless declared
        versions.META_CONVERSATION: CONVERSATION,
    }
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": {**given, **meta}},
    }
    headers = {
        "Content-Type": "application/json",
        versions.VERSION_HEADER: versions.STATELESS,
        versions.METHOD_HEADER: method,
    }
    named = params.get(NAME_BEARING.get(method, ""))
    if isinstance(named, str):
        headers[versions.NAME_HEADER] = _header_text(named)
    return json.dumps(body).encode(), headers


NAME_BEARING = versions.NAME_BEARING
"""Methods whose named parameter the request mirrors in the Mcp-Name header (the add-on's own table)."""


def _header_text(value: str) -> str:
    """A header value as it travels: printable ASCII as it is, anything else as =?base64?…?= (2026-07-28)."""
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


def _progress_only(on_progress: OnProgress) -> OnNotification:
    async def progress(message: dict[str, Any]) -> None:
        if message.get("method") == "notifications/progress":
            await on_progress(message["params"])

    return progress


class BridgeSilent(ToolCallFailed):
    """The bridge sent no byte for the inactivity timeout while an answer was due; the request was cancelled."""


class AnswerOverdue(ToolCallFailed):
    """The answer did not end within the request's limit (its tool's own, or the caller's); it was cancelled."""


class TokenRefused(ToolCallFailed):
    """The bridge refused the runtime file's token at its gate (HTTP 401): nothing ran."""


def token_refused(endpoint: LiveEndpoint) -> TokenRefused:
    """A 401 from the endpoint the runtime file names: that file's token is not the bridge's."""
    return TokenRefused(
        f"Blender at {endpoint.url} refused the token from {endpoint.runtime_file} (HTTP 401): the file is "
        "stale or was written by another program; restart the bridge in Blender, then try again"
    )


class BridgeLink:
    """One endpoint's idle keep-alive connections and its requests; `close()` when done with the endpoint.

    An answer is a JSON body with a Content-Length, or, for a call that asked for progress, an event stream in
    chunks whose last event is the answer. A request whose caller is cancelled closes its connection, which is how
    the 2026-07-28 transport says "cancelled" to the bridge; so does a request that outlives its timeouts.
    """

    def __init__(self, endpoint: LiveEndpoint, *, inactivity: float = SILENCE, limit: float | None = None) -> None:
        self.endpoint = endpoint
        self._inactivity = inactivity
        self._limit = limit
        """Seconds any request may take overall; None: its tool's own limit."""
        self._idle: list[_Connection] = []
        self._next_id = 0
        parts = urlsplit(endpoint.url)
        self._host, self._path = parts.hostname or "127.0.0.1", parts.path or "/"
        self._head = f"Host: {parts.netloc}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in endpoint.headers().items())

    async def request(
        self, method: str, params: dict[str, Any], on_progress: OnProgress | None = None
    ) -> dict[str, Any]:
        """The JSON-RPC result; the bridge's JSON-RPC error as MCPError; anything else as ToolCallFailed.
        With `on_progress`, the call asks for progress and each notification is given to it as it comes."""
        self._next_id += 1
        limit = self._limit if self._limit is not None else limit_of(method, params)
        what = f"{method} {params['name']}" if method == "tools/call" else method
        if on_progress is not None:
            params = {**params, "_meta": {**params.get("_meta", {}), "progressToken": self._next_id}}
        body, headers = modern_request(method, params, self._next_id)
        if on_progress is not None:
            headers["Accept"] = "application/json, text/event-stream"
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        message = f"POST {self._path} HTTP/1.1\r\n{self._head}{head}Content-Length: {len(body)}\r\n\r\n"
        # A whole (JSON) answer says nothing until it is whole: only a streamed one can be timed by its silence.
        clock = _Clock(self._inactivity if on_progress is not None else limit, limit)
        try:
            with clock.scope:
                return self._result(*await self._exchange(message.encode("latin-1") + body, on_progress, clock))
        except (
            OSError,
            ValueError,  # a chunk size or an event that is not what the bridge sends
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.DelimiterNotFound,
            anyio.BrokenResourceError,
        ) as exc:
            raise ToolCallFailed(f"the connection to Blender at {self.endpoint.url} failed: {exc!r}") from None
        raise clock.failure(self.endpoint.url, what)  # only when the clock's scope ended the exchange

    async def listen(self, uris: list[str], on_updated: Callable[[str], Awaitable[None]]) -> None:
        """A `subscriptions/listen` stream for `uris` on a connection of its own: each updated URI to `on_updated`,
        until the bridge ends the stream (it stops: returns) or the connection fails (ToolCallFailed)."""
        self._next_id += 1
        params = {"notifications": {"resourceSubscriptions": uris}}
        body, headers = modern_request("subscriptions/listen", params, self._next_id)
        headers["Accept"] = "application/json, text/event-stream"
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        message = f"POST {self._path} HTTP/1.1\r\n{self._head}{head}Content-Length: {len(body)}\r\n\r\n"

        async def updated(message: dict[str, Any]) -> None:
            uri = message["params"].get("uri")
            if message.get("method") == "notifications/resources/updated" and isinstance(uri, str):
                await on_updated(uri)

        connection = await self._dial()
        try:
            await connection.send(message.encode("latin-1") + body)
            _version, status, fields = _head(await connection.receive_until(b"\r\n\r\n", MAX_HEAD))
            if fields.get("content-type") != "text/event-stream":
                size = fields.get("content-length", "0")
                content = await connection.receive_exactly(min(int(size), MAX_HEAD)) if size.isdigit() else b""
                self._result(status, content)  # raises the bridge's refusal
                raise ToolCallFailed(f"Blender at {self.endpoint.url} answered subscriptions/listen without a stream")
            await _answer_of_stream(connection, updated)
        except (
            OSError,
            ValueError,
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.DelimiterNotFound,
            anyio.BrokenResourceError,
        ) as exc:
            raise ToolCallFailed(f"the update stream from Blender at {self.endpoint.url} failed: {exc!r}") from None
        finally:
            await connection.aclose()

    async def _exchange(self, request: bytes, on_progress: OnProgress | None, clock: _Clock) -> tuple[int, bytes]:
        """One request and its answer. A kept connection that ended before any byte of an answer came gets the
        request once more on a new one, as HTTP clients do: the bridge never closes a connection after a request
        passed its gate without answering it (README › Decisions), so that request never ran."""
        resent = False
        while self._idle:
            kept = self._idle.pop()
            if kept.stale():
                await kept.aclose()
                continue
            try:
                return await self._send(kept, request, on_progress, clock)
            except _ClosedBeforeAnswer:
                resent = True
                break
        try:
            connection = await self._dial()
        except LiveEndpointUnavailable as gone:
            if not resent:
                raise  # nothing was sent: the state the runtime file and the process say
            raise ToolCallFailed(  # sent, and the Blender went away before answering: it may have run
                f"Blender at {self.endpoint.url} went away after the request was sent and before any answer ({gone}); "
                "the call may have run: read the scene before repeating it"
            ) from None
        try:
            return await self._send(connection, request, on_progress, clock)
        except _ClosedBeforeAnswer as closed:
            raise anyio.EndOfStream from closed

    async def _dial(self) -> _Connection:
        """A new connection, only to this user's Blender: the pid the file named may have died since the last
        connection and been taken, with its port, by another user's process, which must never get the token."""
        require_own_blender(self.endpoint)
        return await _Connection.dial(self._host, self.endpoint.port)

    async def _send(
        self, connection: _Connection, request: bytes, on_progress: OnProgress | None, clock: _Clock
    ) -> tuple[int, bytes]:
        connection.clock = clock if clock.silence < clock.limit else None  # else its deadline never moves
        try:
            await connection.send(request)
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            if connection.buffer:  # the bridge answered before it read the whole request (a refusal): that answer
                return await self._answer(connection, on_progress)
            await connection.aclose()
            raise _ClosedBeforeAnswer from exc  # the bridge closed it, and said so before we sent
        except BaseException:
            await connection.aclose()
            raise
        return await self._answer(connection, on_progress)

    async def _answer(self, connection: _Connection, on_progress: OnProgress | None) -> tuple[int, bytes]:
        """Read one answer; the connection is kept for the next request or closed (a cancel mid-answer hangs up)."""
        done = keep = False
        try:
            try:
                first = await connection.receive_until(b"\r\n\r\n", MAX_HEAD)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, ConnectionError) as exc:
                if not connection.buffer:
                    raise _ClosedBeforeAnswer from exc
                raise
            version, status, fields = _head(first)
            if fields.get("content-type") == "text/event-stream" and on_progress is not None:
                content = await _answer_of_stream(connection, _progress_only(on_progress))
            elif not fields.get("content-length", "").isdigit():
                raise ToolCallFailed(f"Blender at {self.endpoint.url} answered without a Content-Length")
            elif int(fields["content-length"]) > MAX_ANSWER:
                raise ToolCallFailed(f"Blender at {self.endpoint.url} announced an answer over {MAX_ANSWER} bytes")
            else:
                content = await connection.receive_exactly(int(fields["content-length"]))
            keep = version == "HTTP/1.1" and "close" not in _tokens(fields.get("connection", ""))
            done = True
        finally:
            connection.clock = None
            if done and keep:
                self._idle.append(connection)
            else:
                await connection.aclose()  # cancelled or failed mid-answer: hanging up is the cancel signal
        return status, content

    def _result(self, status: int, content: bytes) -> dict[str, Any]:
        try:
            answer = loads(content)
        except ValueError:
            answer = None
        if status == 401:
            raise token_refused(self.endpoint)
        if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
            raise MCPError.from_error_data(ErrorData.model_validate(answer["error"]))
        if status != 200 or not isinstance(answer, dict) or not isinstance(answer.get("result"), dict):
            raise ToolCallFailed(f"Blender at {self.endpoint.url} answered HTTP {status} without a result")
        return answer["result"]

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.aclose()


async def request_once(
    endpoint: LiveEndpoint,
    method: str,
    params: dict[str, Any],
    *,
    limit: float | None = None,
    on_progress: OnProgress | None = None,
) -> dict[str, Any]:
    """One request on a link of its own (`call`, `status`, a look at another Blender), closed after it."""
    link = BridgeLink(endpoint, limit=limit)
    try:
        return await link.request(method, params, on_progress)
    finally:
        await link.close()


class Links:
    """The kept link to the bridge called last; another endpoint (a restart, another Blender) gets a new one.

    A restarted bridge may come back on the same port with a new token: its old link's headers carry the old
    token, and its kept connections end at the old process, so a link is reused only for the same url, token and
    pid, whichever record (`server.json` or `servers/<pid>.json`) named them.
    """

    def __init__(self, inactivity: float = SILENCE) -> None:
        self._inactivity = inactivity
        self._link: BridgeLink | None = None
        self._lock = anyio.Lock(fast_acquire=True)  # taken without a turn of the event loop when free (~40 µs)

    async def link_to(self, endpoint: LiveEndpoint) -> BridgeLink:
        async with self._lock:
            if self._link is not None and _same_bridge(self._link.endpoint, endpoint):
                return self._link
            await self.close()
            self._link = BridgeLink(endpoint, inactivity=self._inactivity)
            return self._link

    async def close(self) -> None:
        if self._link is not None:
            link, self._link = self._link, None
            await link.close()


def _same_bridge(one: LiveEndpoint, other: LiveEndpoint) -> bool:
    return (one.url, one.token, one.pid) == (other.url, other.token, other.pid)


class _Clock:
    """One request's deadline: `silence` seconds after the last byte received, and never past its `limit`."""

    def __init__(self, silence: float, limit: float) -> None:
        now = anyio.current_time()
        self.silence, self.limit, self.end = silence, limit, now + limit
        self.scope = anyio.CancelScope(deadline=min(self.end, now + silence))

    def heard(self) -> None:
        self.scope.deadline = min(self.end, anyio.current_time() + self.silence)

    def failure(self, url: str, what: str) -> ToolCallFailed:
        if anyio.current_time() >= self.end:
            return AnswerOverdue(f"Blender at {url} did not finish {what} within {self.limit:g} s, its limit")
        return BridgeSilent(
            f"Blender at {url} sent nothing for {self.silence:g} s while {what} was due (the inactivity timeout)"
        )


class _Connection(asyncio.Protocol):
    """One connection to the bridge: the bytes the event loop hands over, in one buffer, read by one request at a
    time. The transport's own protocol, not anyio's stream, which pauses and resumes the socket's reading around
    every receive (about 0.1 ms of a relayed call, docs/performance.md): here reading pauses only while more than
    READ_AHEAD bytes wait that nobody asked for yet."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.clock: _Clock | None = None
        """The running request's clock, told when bytes come (None: an answer timed by its limit alone)."""
        self._transport: asyncio.Transport | None = None
        self._fd = -1
        self._ended = False
        """The bridge closed its side, or the connection failed: no byte will come any more."""
        self._failure: OSError | None = None
        self._arrived: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._paused = False

    @classmethod
    async def dial(cls, host: str, port: int) -> _Connection:
        _, connection = await asyncio.get_running_loop().create_connection(cls, host, port)
        return connection  # asyncio turns Nagle's algorithm off for TCP: a request leaves at once

    # What the event loop calls -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._fd = transport.get_extra_info("socket").fileno()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > READ_AHEAD and not self._paused and self._transport is not None:
            self._transport.pause_reading()
            self._paused = True
        self._wake()

    def eof_received(self) -> bool:
        self._ended = True
        self._wake()
        return False  # the transport closes: the bridge sends nothing after its close

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended = True
        if isinstance(exc, OSError):
            self._failure = exc
        self._wake()
        self.resume_writing()

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    def _wake(self) -> None:
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(None)

    # What a request calls ----------------------------------------------------------------------

    async def send(self, data: bytes) -> None:
        if self._ended or self._transport is None or self._transport.is_closing():
            raise anyio.BrokenResourceError  # the bridge closed it
        self._transport.write(data)
        if self._drained is not None:  # the socket's buffer is full: wait until the bridge takes the rest
            await self._drained
            if self._ended:
                raise anyio.BrokenResourceError

    async def receive_until(self, delimiter: bytes, max_bytes: int) -> bytes:
        """The bytes before `delimiter`, which is taken too; DelimiterNotFound past `max_bytes`."""
        searched = 0
        while (found := self.buffer.find(delimiter, searched)) < 0:
            if len(self.buffer) >= max_bytes:
                raise anyio.DelimiterNotFound(max_bytes)
            searched = max(0, len(self.buffer) - len(delimiter) + 1)
            await self._more()
        if found > max_bytes:
            raise anyio.DelimiterNotFound(max_bytes)
        taken = bytes(self.buffer[:found])
        del self.buffer[: found + len(delimiter)]
        return taken

    async def receive_exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            await self._more()
        taken = bytes(self.buffer[:size])
        del self.buffer[:size]
        return taken

    async def _more(self) -> None:
        """Wait for more bytes: IncompleteRead, or the connection's own error, once none will come."""
        if self._ended:
            if self._failure is not None:
                raise self._failure
            raise anyio.IncompleteRead
        if self._paused and self._transport is not None:
            self._transport.resume_reading()
            self._paused = False
        self._arrived = asyncio.get_running_loop().create_future()
        try:
            await self._arrived
        finally:
            self._arrived = None
        if self.clock is not None:
            self.clock.heard()

    def stale(self) -> bool:
        """Readable while idle: the bridge closed it (its idle timeout, room at its cap) or sent what nobody asked
        for. Reusing it would cost the request its one resend, or read those bytes as its answer. The socket is
        asked too: what came since the event loop last looked is not in the buffer yet."""
        if self.buffer or self._ended or self._transport is None or self._transport.is_closing():
            return True
        if not hasattr(select, "poll"):  # Windows: select() there has no limit on the descriptor's number
            return bool(select.select([self._fd], [], [], 0)[0])
        poller = select.poll()  # elsewhere select() refuses a descriptor numbered 1024 or more
        poller.register(self._fd, select.POLLIN)
        return bool(poller.poll(0))

    async def aclose(self) -> None:
        """At once, dropping what this process has not handed to the socket yet: a request given up while its bytes
        were still going out is cut there, not flushed to a bridge that stopped reading (a graceful close would
        send it all first). What the kernel already took still arrives; the bridge runs only a request that came
        whole, from a client still there when its turn comes."""
        if self._transport is not None:
            self._transport.abort()  # a request still waiting on it hears IncompleteRead


def _head(raw: bytes) -> tuple[str, int, dict[str, str]]:
    """An answer's version, status and fields (names in lower case; a repeated field's values joined, as the
    bridge joins a request's); ValueError for a status line that is not one."""
    status_line, *lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    code = rest.partition(" ")[0]
    if not (len(code) == 3 and code.isascii() and code.isdigit()):
        raise ValueError(f"a status line without a status: {status_line[:80]!r}")
    fields: dict[str, str] = {}
    for name, _, value in (line.partition(":") for line in lines):
        key = name.strip().lower()
        fields[key] = f"{fields[key]}, {value.strip()}" if key in fields else value.strip()
    return version, int(code), fields


def _tokens(value: str) -> list[str]:
    return [token.strip().lower() for token in value.split(",")]


class _ClosedBeforeAnswer(Exception):
    """The connection ended (closed or reset) before the first byte of an answer."""


async def _answer_of_stream(stream: _Connection, on_notification: OnNotification) -> bytes:
    """Read an event stream in chunks to its end: each notification to `on_notification`, the answer back."""
    pending, answer = b"", b""
    while size := int((await stream.receive_until(b"\r\n", 32)).split(b";")[0], 16):
        if not 0 < size <= MAX_EVENT:
            raise ValueError(f"a chunk of {size} bytes")
        pending += await stream.receive_exactly(size)
        await stream.receive_exactly(2)
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            data = b"\n".join(line[6:] for line in event.split(b"\n") if line.startswith(b"data: "))
            if not data:
                continue  # a comment (a stream's keep-alive)
            message = loads(data)
            if not isinstance(message, dict):
                raise ValueError("an event that is not a JSON-RPC message")
            if "id" in message:
                answer = data
            elif isinstance(message.get("params"), dict):
                await on_notification(message)
        if len(pending) > MAX_EVENT:
            raise anyio.IncompleteRead
    await stream.receive_until(b"\r\n", 32)  # the empty trailer
    return answer
