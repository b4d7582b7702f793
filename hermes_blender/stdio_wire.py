"""stdin and stdout as the event loop's own pipes, for the stdio server.

The SDK's stdio transport reads each line and writes each message through a worker thread (one hop
to read, two to write and flush): on two cores those hops were about a fifth of a relayed call. When
both ends are pipes or sockets (what every client that starts a command gives us) they are read and
written by the event loop instead. Anything else (a terminal, a file, Windows, whose loop cannot wait
on an anonymous pipe) keeps the SDK's transport: making a terminal non-blocking would leave the
user's shell non-blocking too.

While serving, fd 0 reads the null device and fd 1 writes to stderr, so a stray print or a child
process can never write into the protocol; both are put back at the end.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.stdio import stdio_server

log = logging.getLogger("hermes_blender.mcp")

READ_SIZE = 256 * 1024
MAX_LINE = 64 * 1024 * 1024
"""A message longer than this is dropped (to its newline) and said in the log: memory stays bounded."""
TOO_LONG = "a message over 64 MiB, dropped"
"""What the SDK is given instead of an over-long line: not JSON, so it is passed over like any such line."""


def _loop_can_serve(fd: int) -> bool:
    if sys.platform == "win32":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's read and write streams over this process's stdin and stdout (see the module's docstring)."""
    if not (_loop_can_serve(0) and _loop_can_serve(1)):
        async with stdio_server() as streams:
            yield streams
        return
    wire_in, wire_out = os.dup(0), os.dup(1)
    _divert()
    transports: list[asyncio.BaseTransport] = []
    try:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=READ_SIZE)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0, closefd=False)
        )
        transports.append(read_transport)
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0, closefd=False)
        )
        transports.append(write_transport)
        write_transport.set_write_buffer_limits(high=0)  # a flush returns once the message is in the pipe
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        async with stdio_server(stdin=_Lines(reader), stdout=_Writes(writer)) as streams:  # type: ignore[arg-type]
            yield streams
    finally:
        for transport in transports:
            transport.close()
        for wire, fd in ((wire_in, 0), (wire_out, 1)):
            os.set_blocking(wire, True)
            os.dup2(wire, fd)
            os.close(wire)


def _divert() -> None:
    """Point fd 0 at the null device and fd 1 at stderr: nothing but the transport reaches the wire."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)


class _Lines:
    """stdin's lines as the SDK reads them (`async for line in stdin`), from the loop's reader."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._pending = bytearray()
        self._dropping = False

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            end = self._pending.find(b"\n")
            if end >= 0:
                line = bytes(self._pending[: end + 1])
                del self._pending[: end + 1]
                if self._dropping:
                    self._dropping = False
                    log.warning("the client sent a message over %d MiB; it was dropped", MAX_LINE >> 20)
                    return TOO_LONG
                return line.decode("utf-8", errors="replace")
            if len(self._pending) > MAX_LINE:
                self._pending.clear()
                self._dropping = True
            chunk = await self._reader.read(READ_SIZE)
            if not chunk:
                raise StopAsyncIteration  # the client closed stdin: the session ends
            self._pending += chunk


class _Writes:
    """stdout as the SDK writes it (`write` then `flush`): the loop's pipe; a flush waits while the client lags."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()
