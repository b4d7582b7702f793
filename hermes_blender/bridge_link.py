"""A kept keep-alive link to one bridge, forwarding JSON-RPC requests in the stateless 2026-07-28 form.

The stdio server relays what its client asked; parsing each answer into the SDK's models and back would
cost more than the bridge's own work (a new MCP session per call cost 23 ms; the SDK client's round trip
on a kept session, about as much as the stdio hop itself). The link is opened only to a pid that is a
Blender of this OS user owning the port (the same check as `BridgeClient.session`), again before every new
connection; a kept connection stays with the process it was opened to.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import anyio
from anyio.streams.buffered import BufferedByteStream
from mcp.shared.exceptions import MCPError
from mcp.types import ErrorData

from .client import modern_request, token_refused
from .contract.liveness import LiveEndpoint, require_own_blender
from .errors import ToolCallFailed

MAX_HEAD = 64 * 1024
MAX_EVENT = 16 * 1024 * 1024
"""The longest event of a streamed answer: its last one carries the whole result."""

OnProgress = Callable[[dict[str, Any]], Awaitable[None]]
"""Hears each `notifications/progress` params of a streamed answer (the bridge's progressToken in them)."""


class BridgeLink:
    """One endpoint's idle keep-alive connections and its requests; `close()` when the endpoint changes.

    HTTP/1.1 as the bridge speaks it over anyio streams (httpx's own machinery cost 0.65 ms of a 2.2 ms
    relayed call): a JSON body with a Content-Length, or, for a call that asked for progress, an event
    stream in chunks whose last event is the answer. A request whose caller is cancelled closes its
    connection, which is how the 2026-07-28 transport says "cancelled" to the bridge.
    """

    def __init__(self, endpoint: LiveEndpoint, *, timeout: float) -> None:
        require_own_blender(endpoint)  # again before each new connection (`_exchange`)
        self.endpoint = endpoint
        self._timeout = timeout
        self._idle: list[BufferedByteStream] = []
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
        if on_progress is not None:
            params = {**params, "_meta": {"progressToken": self._next_id}}
        body, headers = modern_request(method, params, self._next_id)
        if on_progress is not None:
            headers["Accept"] = "application/json, text/event-stream"
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        message = f"POST {self._path} HTTP/1.1\r\n{self._head}{head}Content-Length: {len(body)}\r\n\r\n"
        try:
            with anyio.fail_after(self._timeout):
                status, content = await self._exchange(message.encode("latin-1") + body, on_progress)
        except (
            OSError,
            ValueError,  # a chunk size or an event that is not what the bridge sends
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.DelimiterNotFound,
            anyio.BrokenResourceError,
            TimeoutError,
        ) as exc:
            raise ToolCallFailed(f"the connection to Blender at {self.endpoint.url} failed: {exc!r}") from None
        return self._result(status, content)

    async def _exchange(self, request: bytes, on_progress: OnProgress | None) -> tuple[int, bytes]:
        """One request and its answer. A kept connection the bridge closed before any byte of an answer came gets
        the request once more on a new one, as HTTP clients do: the bridge never closes a connection after a
        request passed its gate without answering it (README › Decisions), so that request never ran."""
        stream = self._idle.pop() if self._idle else None
        if stream is not None:
            try:
                await stream.send(request)
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.aclose()  # the bridge closed it while idle, and said so before we sent
            else:
                try:
                    return await self._answer(stream, on_progress)
                except _ClosedBeforeAnswer:
                    pass  # closed while idle (its idle timeout, or room made at the cap): the request never ran
        # Every new connection is dialled only to this user's Blender: the pid checked when the link was made may
        # since have died and been taken, with its port, by another user's process (the token must not go there).
        require_own_blender(self.endpoint)
        stream = BufferedByteStream(await anyio.connect_tcp(self._host, self.endpoint.port))
        try:
            await stream.send(request)
        except BaseException:
            await stream.aclose()
            raise
        try:
            return await self._answer(stream, on_progress)
        except _ClosedBeforeAnswer as closed:
            raise anyio.EndOfStream from closed

    async def _answer(self, stream: BufferedByteStream, on_progress: OnProgress | None) -> tuple[int, bytes]:
        """Read one answer; the stream is kept for the next request or closed (a cancel mid-answer hangs up)."""
        done = keep = False
        try:
            try:
                first = await stream.receive_until(b"\r\n\r\n", MAX_HEAD)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, ConnectionError) as exc:
                if not stream.buffer:
                    raise _ClosedBeforeAnswer from exc
                raise
            head = first.decode("latin-1").split("\r\n")
            status = int(head[0].split(" ", 2)[1])
            fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:])}
            if fields.get("content-type") == "text/event-stream" and on_progress is not None:
                content = await _answer_of_stream(stream, on_progress)
            elif not fields.get("content-length", "").isdigit():
                raise ToolCallFailed(f"Blender at {self.endpoint.url} answered without a Content-Length")
            else:
                content = await stream.receive_exactly(int(fields["content-length"]))
            keep = fields.get("connection", "").lower() != "close"
            done = True
        finally:
            if done and keep:
                self._idle.append(stream)
            else:
                await stream.aclose()  # cancelled or failed mid-answer: hanging up is the cancel signal
        return status, content

    def _result(self, status: int, content: bytes) -> dict[str, Any]:
        try:
            answer = json.loads(content)
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
        for stream in idle:
            await stream.aclose()


class _ClosedBeforeAnswer(Exception):
    """The connection ended (closed or reset) before the first byte of an answer."""


async def _answer_of_stream(stream: BufferedByteStream, on_progress: OnProgress) -> bytes:
    """Read an event stream in chunks to its end: each progress notification to `on_progress`, the answer back."""
    pending, answer = b"", b""
    while size := int((await stream.receive_until(b"\r\n", 32)).split(b";")[0], 16):
        pending += await stream.receive_exactly(size)
        await stream.receive_exactly(2)
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            data = b"\n".join(line[6:] for line in event.split(b"\n") if line.startswith(b"data: "))
            message = json.loads(data)
            if message.get("method") == "notifications/progress":
                await on_progress(message["params"])
            elif "id" in message:
                answer = data
        if len(pending) > MAX_EVENT:
            raise anyio.IncompleteRead
    await stream.receive_until(b"\r\n", 32)  # the empty trailer
    return answer
