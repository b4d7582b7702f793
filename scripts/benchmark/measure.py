"""The floors every row is timed beside, and how: alternation call by call, percentiles, a kept connection."""

from __future__ import annotations

import http.client
import os
import platform
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hermes_blender.client import modern_request

SUMMARY, SUMMARY_HEADERS = modern_request("tools/call", {"name": "get_objects_summary", "arguments": {}})


STREAMED, STREAMED_HEADERS = modern_request(
    "tools/call", {"name": "get_objects_summary", "arguments": {}, "_meta": {"progressToken": "bench"}}
)


STREAMED_HEADERS["Accept"] = "application/json, text/event-stream"


DISCOVER = modern_request("server/discover", {})


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50": pick(0.50) * 1000, "p95": pick(0.95) * 1000, "p99": pick(0.99) * 1000, "n": len(ordered)}


def paired(
    floor: Callable[[], object], path: Callable[[], object], n: int, warmup: int = 20
) -> tuple[dict[str, float], dict[str, float]]:
    """Alternate floor and path call by call, so both meet the same machine conditions."""
    for _ in range(warmup):
        floor()
        path()
    floor_samples, path_samples = [], []
    for _ in range(n):
        for fn, samples in ((floor, floor_samples), (path, path_samples)):
            started = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - started)
    return percentiles(floor_samples), percentiles(path_samples)


def timed(fn: Callable[[], object], n: int, warmup: int = 20) -> dict[str, float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return percentiles(samples)


def accepted(sock: socket.socket) -> Iterator[socket.socket]:
    """A floor's connections, Nagle off on each, until its listener is closed."""
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        yield conn


def served(handler: Callable[[socket.socket], None], conn: socket.socket) -> None:
    """One connection, answered to its end and closed: a client gone mid-answer is no failure of a floor."""
    with conn:
        try:
            handler(conn)
        except OSError:
            pass


class Floor:
    """Minimal loopback servers: the best any bridge could do on this machine."""

    def __init__(self, handler: Callable[[socket.socket], None]) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._handler = handler
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        for conn in accepted(self.sock):
            threading.Thread(target=served, args=(self._handler, conn), daemon=True).start()

    def close(self) -> None:
        self.sock.close()


class InlineFloor:
    """The physical floor of a one-request-per-connection wire: one thread that accepts, reads the request and
    answers inline, with no thread, hand-off or selector in between (what the main loop can at best be)."""

    def __init__(self, handler: Callable[[socket.socket], None] | None = None, backlog: int = 128) -> None:
        self._handler = handler or nul_echo
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=backlog)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        for conn in accepted(self.sock):
            served(self._handler, conn)

    def close(self) -> None:
        self.sock.close()


def nul_echo(conn: socket.socket) -> None:
    buffer = b""
    while b"\0" not in buffer:
        chunk = conn.recv(65536)
        if not chunk:
            return
        buffer += chunk
    conn.sendall(b'{"status":"ok","result":{}}\0')


def http_echo(conn: socket.socket) -> None:
    buffer = b""
    while True:
        while b"\r\n\r\n" not in buffer:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buffer += chunk
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
        )
        while len(buffer) < length:
            buffer += conn.recv(65536)
        body, buffer = buffer[:length], buffer[length:]
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )


class KeepAlive:
    """One persistent HTTP/1.1 connection, TCP_NODELAY, as a careful client would hold."""

    def __init__(self, port: int, headers: dict[str, str], timeout: float = 30.0) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.headers = {"Content-Type": "application/json", **headers}

    def post(self, path: str, body: bytes, headers: dict[str, str] = SUMMARY_HEADERS) -> bytes:
        self.conn.request("POST", path, body=body, headers={**self.headers, **headers})
        response = self.conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")
        return data


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    import importlib.metadata

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "bpy": importlib.metadata.version("bpy"),
        "mcp": importlib.metadata.version("mcp"),
    }
