"""A loopback HTTP server that answers as a test scripts it, for what the bridge itself never does on cue: close a
kept connection at a chosen moment, say `Connection: close` and keep listening, send bytes nobody asked for, stream
progress for a while, or say nothing at all."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Request:
    connection: int
    """Which connection it came on, counted from 0 in the order they were accepted."""
    head: str
    body: dict[str, Any]

    @property
    def token(self) -> str:
        found = re.search(r"Authorization: Bearer (\S+)", self.head)
        return found.group(1) if found else ""


Answer = Callable[[socket.socket, Request], bool]
"""Writes what the server says to one request; whether this connection reads another."""


def json_answer(request: Request, result: dict[str, Any], *, extra: str = "") -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": request.body["id"], "result": result}).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def event(message: dict[str, Any]) -> bytes:
    """One SSE event as one chunk of a chunked answer."""
    data = b"data: " + json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


STREAM_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


@dataclass
class ScriptedBridge:
    answer: Answer
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    """How many connections were accepted."""

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def fileno(self) -> int:
        """The listening socket, for a child process to hold it too."""
        return self._listener.fileno()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            number, self.connections = self.connections, self.connections + 1
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        with conn:
            buffer = b""
            while True:
                while b"\r\n\r\n" not in buffer:
                    if not (data := _recv(conn)):
                        return
                    buffer += data
                head, _, rest = buffer.partition(b"\r\n\r\n")
                found = re.search(rb"Content-Length: (\d+)", head)
                length = int(found.group(1)) if found else 0
                while len(rest) < length:
                    if not (data := _recv(conn)):
                        return
                    rest += data
                request = Request(number, head.decode("latin-1"), json.loads(rest[:length]))
                buffer = rest[length:]
                self.requests.append(request)
                try:
                    if not self.answer(conn, request):
                        return
                except OSError:
                    return

    def close(self) -> None:
        self._listener.close()


def _recv(conn: socket.socket) -> bytes:
    try:
        return conn.recv(65536)
    except OSError:
        return b""
