"""A loopback forwarder that adds the bridge's bearer token, for clients that cannot send a header (the MCP
conformance suite takes only a URL).

Each request goes to the bridge on a connection of its own, with `Authorization` added and `Connection: close`;
a Host naming the forwarder's port is rewritten to the bridge's, and any other Host is passed on as it came, so
the bridge's own DNS-rebinding guard is what a foreign Host meets. Responses, event streams included, are
copied back as they arrive.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

HEAD_END = b"\r\n\r\n"
_HOP = re.compile(rb"^(authorization|connection|keep-alive):", re.IGNORECASE)


def _rewritten(head: bytes, token: str, own_port: int, bridge_port: int) -> bytes:
    request_line, *fields = head.split(b"\r\n")
    kept = []
    for field in fields:
        if _HOP.match(field):
            continue
        name, _, value = field.partition(b":")
        if name.strip().lower() == b"host":
            value = re.sub(rb":%d\s*$" % own_port, b":%d" % bridge_port, value.strip())
            field = b"Host: " + value
        kept.append(field)
    kept += [f"Authorization: Bearer {token}".encode(), b"Connection: close"]
    return b"\r\n".join([request_line, *kept]) + HEAD_END


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _serve_one(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    token: str,
    own_port: int,
    bridge_port: int,
) -> None:
    try:
        head = await client_reader.readuntil(HEAD_END)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        client_writer.close()
        return
    length = re.search(rb"\r\ncontent-length:\s*(\d+)", head, re.IGNORECASE)
    body = await client_reader.readexactly(int(length[1])) if length else b""
    bridge_reader, bridge_writer = await asyncio.open_connection("127.0.0.1", bridge_port)
    bridge_writer.write(_rewritten(head[: -len(HEAD_END)], token, own_port, bridge_port) + body)
    await bridge_writer.drain()
    await _copy(bridge_reader, client_writer)
    bridge_writer.close()


@contextmanager
def auth_proxy(bridge_port: int, token: str) -> Iterator[int]:
    """Serve on a loopback port until the block ends; yields that port."""
    loop = asyncio.new_event_loop()
    started: list[asyncio.Server] = []

    async def start() -> None:
        ports: list[int] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _serve_one(reader, writer, token, ports[0], bridge_port)

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        ports.append(server.sockets[0].getsockname()[1])
        started.append(server)

    loop.run_until_complete(start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield started[0].sockets[0].getsockname()[1]
    finally:
        loop.call_soon_threadsafe(started[0].close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
