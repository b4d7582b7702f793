#!/usr/bin/env python3
"""Latency and throughput of the bridge, beside the loopback floors measured in the same run.

Run with `uv run scripts/bench.py` (add `--json` for machine-readable output, `--quick` for
fewer iterations). Every path is timed against its own floor: the Lab wire against a raw TCP
echo with one connection per request, MCP over keep-alive HTTP against a raw HTTP echo.

`--python PY` (repeatable) runs the whole benchmark under other interpreters, each a Blender
line's venv from scripts/bpy_line.sh (e.g. `.venvs/bpy-4.5.15/bin/python`), and prints one
row per line, so one run compares them on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import http.client
import itertools
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from api_bench import api_lines, api_table  # noqa: E402
from farm_bench import farm_lines, farm_table  # noqa: E402
from hermes_bench import hermes_beside_official  # noqa: E402
from modes_bench import modes_lines, modes_table  # noqa: E402

from blender_addon.net.loopback import BACKLOG  # noqa: E402
from hermes_blender.blender_host import ADDON_MODULE  # noqa: E402
from hermes_blender.client import BridgeClient, modern_request  # noqa: E402
from hermes_blender.contract.liveness import RuntimeFileSpec, read_live_endpoint  # noqa: E402
from hermes_blender.errors import ToolCallFailed  # noqa: E402
from hermes_blender.headless import POLL_INTERVAL, HeadlessBlender  # noqa: E402
from hermes_blender.lab import lab_exchange, lab_execute  # noqa: E402
from hermes_blender.stdio_server import shipped_catalogue  # noqa: E402
from tests.sdk_client import SdkClient  # noqa: E402

SUMMARY, SUMMARY_HEADERS = modern_request("tools/call", {"name": "get_objects_summary", "arguments": {}})
STREAMED, STREAMED_HEADERS = modern_request(
    "tools/call", {"name": "get_objects_summary", "arguments": {}, "_meta": {"progressToken": "bench"}}
)
STREAMED_HEADERS["Accept"] = "application/json, text/event-stream"
FRAMES_SCENE = (
    "import bpy\nscene = bpy.context.scene\nscene.render.resolution_x, scene.render.resolution_y = 64, 48\n"
    "scene.render.engine, scene.cycles.device, scene.cycles.samples = 'CYCLES', 'CPU', 1\n"
    "scene.frame_start, scene.frame_end = 1, 1000\nresult = {}"
)
"""Frames of a fraction of a second each on the CPU, for the render-cancel row."""
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


# --- floors -----------------------------------------------------------------------------------


class Floor:
    """Minimal loopback servers: the best any bridge could do on this machine."""

    def __init__(self, handler: Callable[[socket.socket], None]) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._handler = handler
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                self._handler(conn)
            except OSError:
                pass

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
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    self._handler(conn)
                except OSError:
                    pass

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


# --- our paths ----------------------------------------------------------------------------------


def official_client_calls(runtime_file: Path, mode: str, n: int) -> dict[str, float]:
    client = SdkClient(RuntimeFileSpec(path=str(runtime_file)), mode=mode)  # type: ignore[arg-type]

    async def run() -> list[float]:
        samples = []
        async with client.session() as session:
            for i in range(n + 10):
                started = time.perf_counter()
                await session.call_tool("get_objects_summary", {})
                if i >= 10:
                    samples.append(time.perf_counter() - started)
        return samples

    return percentiles(asyncio.run(run()))


STDIO_ROW = "MCP get_objects_summary via hermes-blender mcp (stdio), official client; x = vs direct HTTP"


def stdio_beside_direct(runtime_file: Path, n: int) -> dict[str, float]:
    """The official client's call through the stdio server, alternated call by call with the same client's
    call straight to the bridge (2026-07-28, a kept session): what the stdio hop costs a client."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "hermes_blender.cli", "mcp", "--runtime-file", str(runtime_file)]
    )

    async def run() -> tuple[list[float], list[float]]:
        direct_samples: list[float] = []
        stdio_samples: list[float] = []
        async with SdkClient(RuntimeFileSpec(path=str(runtime_file)), mode="2026-07-28").session() as direct:
            async with Client(stdio_client(server), read_timeout_seconds=60) as stdio:  # type: ignore[arg-type]
                for i in range(n + 20):
                    for client, samples in ((direct, direct_samples), (stdio, stdio_samples)):
                        started = time.perf_counter()
                        await client.call_tool("get_objects_summary", {})
                        if i >= 20:
                            samples.append(time.perf_counter() - started)
        return direct_samples, stdio_samples

    direct_samples, stdio_samples = asyncio.run(run())
    direct_stats, stdio_stats = percentiles(direct_samples), percentiles(stdio_samples)
    return {**stdio_stats, "ratio_p50": stdio_stats["p50"] / direct_stats["p50"], "direct_p50": direct_stats["p50"]}


def cancel_to_stop(port: int, headers: dict[str, str], runs: int) -> dict[str, float]:
    """From a client hanging up on a running script to the next request's answer: the script must be stopped for
    that answer to come (the main thread runs one job at a time), so this is the cancel's own latency."""
    folder = Path(tempfile.mkdtemp(prefix="hermes-bench-cancel-"))
    link = KeepAlive(port, headers)
    samples = []
    for run in range(runs):
        started = folder / f"started-{run}"
        code = f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(60)\nresult = {{}}"
        body, extra = modern_request("tools/call", {"name": "execute_blender_code", "arguments": {"code": code}})
        head = "".join(f"{k}: {v}\r\n" for k, v in {**headers, **extra, "Content-Length": str(len(body))}.items())
        with socket.create_connection(("127.0.0.1", port), timeout=30) as leaving:
            leaving.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}\r\n".encode() + body)
            while not started.exists():
                time.sleep(0.001)
        hung_up = time.perf_counter()
        link.post("/mcp", *DISCOVER)
        samples.append(time.perf_counter() - hung_up)
    return percentiles(samples)


def cancel_render_to_stop(port: int, headers: dict[str, str], runs: int) -> dict[str, float]:
    """From a client closing a frame range's event stream (once two frames are written) to the next request's
    answer: the range must have stopped for that answer to come. It stops between frames, so this includes the
    rest of the frame being rendered when the stream closed (`frame_p50`: one frame's time, from the files)."""
    link = KeepAlive(port, headers)
    body, extra = modern_request("tools/call", {"name": "execute_blender_code", "arguments": {"code": FRAMES_SCENE}})
    link.post("/mcp", body, extra)
    samples, frames = [], []
    for _ in range(runs):
        folder = tempfile.mkdtemp(prefix="hermes-bench-frames-")
        params = {
            "name": "render_frames_to_folder",
            "arguments": {"output_folder": folder},
            "_meta": {"progressToken": 1},
        }
        body, extra = modern_request("tools/call", params)
        extra["Accept"] = "application/json, text/event-stream"
        head = "".join(f"{k}: {v}\r\n" for k, v in {**headers, **extra, "Content-Length": str(len(body))}.items())
        with socket.create_connection(("127.0.0.1", port), timeout=30) as leaving:
            leaving.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}\r\n".encode() + body)
            while len(written := sorted(Path(folder).iterdir())) < 2:
                time.sleep(0.001)
        closed = time.perf_counter()
        link.post("/mcp", *DISCOVER)
        samples.append(time.perf_counter() - closed)
        frames.append(written[1].stat().st_mtime - written[0].stat().st_mtime)  # one frame, in seconds as samples
    stats = percentiles(samples)
    stats["frame_p50"] = percentiles(frames)["p50"] if frames else float("nan")
    return stats


def beside_a_task(port: int, headers: dict[str, str], n: int) -> dict[str, float]:
    """`server/discover` while a frame task renders frames of about 100 ms: a request waits for the frame being
    rendered to end (one step per turn of the loop), and a client that asks again at once meets the next frame
    just begun, so this is about one frame, never more."""
    link = KeepAlive(port, headers)
    body, extra = modern_request("tools/call", {"name": "execute_blender_code", "arguments": {"code": FRAMES_SCENE}})
    link.post("/mcp", body, extra)
    folder = tempfile.mkdtemp(prefix="hermes-bench-task-")
    body, extra = modern_request(
        "tools/call", {"name": "start_render_frames_task", "arguments": {"output_folder": folder}}
    )
    task_id = json.loads(link.post("/mcp", body, extra))["result"]["structuredContent"]["task_id"]
    try:
        return timed(lambda: link.post("/mcp", *DISCOVER), n, warmup=2)
    finally:
        body, extra = modern_request(
            "tools/call", {"name": "cancel_render_frames_task", "arguments": {"task_id": task_id}}
        )
        link.post("/mcp", body, extra)


def throughput(port: int, headers: dict[str, str], clients: int, calls: int) -> dict[str, float]:
    errors: list[str] = []

    def worker() -> None:
        link = KeepAlive(port, headers)
        for _ in range(calls):
            try:
                link.post("/mcp", SUMMARY)
            except Exception as exc:
                errors.append(str(exc))

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return {
        "clients": clients,
        "calls": clients * calls,
        "per_second": clients * calls / elapsed,
        "errors": len(errors),
    }


FLOOD_CONNECTIONS = 64
FLOOD_BLOCKS = (
    (b"X-Flood: " + b"a" * 150 + b"\r\n") * 98,
    b"X-Flood: a\r\n" * 1300,
)
"""The costliest header blocks anyone may send without a token, about 16 KiB each: one header repeated to the
line limit in long lines (100 with the request line and Host), and in as many short lines as fit (refused
once counted now; the old parser joined them in quadratic time)."""


def flood(port: int) -> None:
    """The worst no-token load a second process can make (run as `bench.py --flood PORT` until killed): 64
    connections at once, each sending a header block and reading its refusal, every fourth one opened and
    closed at once (churn); each is replaced as soon as it ends. Prints what it achieved, per second."""
    import selectors

    selector = selectors.DefaultSelector()
    requests = [b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n" % (port, block) for block in FLOOD_BLOCKS]
    done = {"header blocks": 0, "connections": 0}
    opened = itertools.count()

    def open_one() -> None:
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        n = next(opened)
        selector.register(sock, selectors.EVENT_WRITE, None if n % 4 == 0 else requests[n % 2])

    for _ in range(FLOOD_CONNECTIONS):
        open_one()
    started = reported = time.perf_counter()
    while True:
        for key, _ in selector.select(0.5):
            sock, request = key.fileobj, key.data
            try:
                if key.events == selectors.EVENT_WRITE and request is not None:
                    sock.sendall(request)  # non-blocking: what does not fit is the bridge's to refuse anyway
                    selector.modify(sock, selectors.EVENT_READ, request)
                    continue
                if request is not None and sock.recv(65536):
                    continue
            except OSError:
                pass
            selector.unregister(sock)
            sock.close()
            done["header blocks" if request is not None else "connections"] += 1
            open_one()
        if time.perf_counter() - reported >= 0.5:
            reported = time.perf_counter()
            print(json.dumps({kind: count / (reported - started) for kind, count in done.items()}), flush=True)


def under_flood(port: int, headers: dict[str, str], n: int) -> dict[str, Any]:
    """An honest keep-alive client's latency without, then during, the worst no-token flood; calls lost."""

    def honest() -> tuple[dict[str, float], int]:
        link, samples, lost = KeepAlive(port, headers), [], 0
        for _ in range(n):
            started = time.perf_counter()
            try:
                link.post("/mcp", SUMMARY)
            except (OSError, RuntimeError, http.client.HTTPException):
                lost += 1
                link = KeepAlive(port, headers)
                continue
            samples.append(time.perf_counter() - started)
        return percentiles(samples), lost

    quiet, quiet_lost = honest()
    flooder = subprocess.Popen([sys.executable, __file__, "--flood", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert flooder.stdout is not None
        while not all(json.loads(flooder.stdout.readline()).values()):
            pass  # until both kinds of flood are under way
        loud, loud_lost = honest()
        rates = json.loads(flooder.stdout.readline())  # the rate over the whole flood, the honest calls included
    finally:
        flooder.kill()
        flooder.communicate()
    return {
        "without": {**quiet, "lost": quiet_lost},
        "with": {**loud, "lost": loud_lost},
        "ratio_p99": loud["p99"] / quiet["p99"],
        "flood_per_second": rates,
    }


STRANGER = ROOT / "scripts" / "stranger.py"
STRANGER_MODES = ("idle", "half-header", "slowloris", "connect-flood")
HONEST_PAUSE = 0.02
"""Seconds between two honest calls, as a model leaves them: long enough that its kept connection is idle."""


class Relay:
    """`hermes-blender mcp` spoken to in raw JSON lines, as a client does: one call, one answer."""

    def __init__(self, runtime_file: Path) -> None:
        command = [sys.executable, "-m", "hermes_blender.cli", "mcp", "--runtime-file", str(runtime_file)]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._next = itertools.count(2)
        self._send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": _INITIALIZE})
        self._answer(1)
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self) -> bool:
        """One get_objects_summary; whether it came back with the scene."""
        n = next(self._next)
        self._send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "get_objects_summary"}})
        return not self._answer(n)["result"].get("isError")

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=30)

    def _send(self, message: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(message) + "\n")
        self._process.stdin.flush()

    def _answer(self, request_id: int) -> dict[str, Any]:
        assert self._process.stdout is not None
        while (message := json.loads(self._process.stdout.readline())).get("id") != request_id:
            pass  # a notification (a changed tool list) before the answer
        return message


_INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}


def new_connection_call(port: int, headers: dict[str, str]) -> bool:
    """One get_objects_summary on a connection of its own, as a client without keep-alive makes it."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/mcp", body=SUMMARY, headers={**SUMMARY_HEADERS, **headers})
        answer = conn.getresponse()
        return answer.status == 200 and b'"isError":true' not in answer.read().replace(b" ", b"")
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def honest_calls(call: Callable[[], bool], n: int, warmup: int = 10) -> dict[str, float]:
    """p50/p99 of `n` calls with a pause between each (after `warmup` untimed ones), and how many were lost."""
    for _ in range(warmup):
        call()
    samples, lost = [], 0
    for _ in range(n):
        started = time.perf_counter()
        if call():
            samples.append(time.perf_counter() - started)
        else:
            lost += 1
        time.sleep(HONEST_PAUSE)
    return {**percentiles(samples), "lost": lost}


def under_strangers(runtime_file: Path, port: int, headers: dict[str, str], n: int) -> list[dict[str, Any]]:
    """Each attack a second process can make without a token (scripts/stranger.py: 300 idle, half-header or
    slowloris connections, or a connect flood), the honest calls through the relay and on a new connection each
    timed beside a quiet phase run just before, in the same run. Under the connect flood the same calls to the
    floor (one thread accepting and answering HTTP inline, the bridge's listen queue) show what the queue itself
    costs: every connection the flood put in it before the honest one is accepted first."""
    floor = InlineFloor(http_echo, backlog=BACKLOG)
    rows = []
    relay = Relay(runtime_file)
    try:
        for mode in STRANGER_MODES:
            paths: list[tuple[str, int, Callable[[], bool]]] = [
                ("relay", port, relay.call),
                ("new connection", port, lambda: new_connection_call(port, headers)),
            ]
            if mode == "connect-flood":
                paths.append(("floor, new connection", floor.port, lambda: new_connection_call(floor.port, {})))
            for path, target, call in paths:
                quiet = honest_calls(call, n)
                load = subprocess.Popen(
                    [sys.executable, str(STRANGER), str(target), mode, "300"], stdout=subprocess.PIPE, text=True
                )
                try:
                    assert load.stdout is not None and load.stdout.readline().strip() == "ready"
                    loud = honest_calls(call, n)
                finally:
                    load.kill()
                    load.communicate()
                rows.append(
                    {
                        "attack": mode,
                        "path": path,
                        "quiet": quiet,
                        "loud": loud,
                        "ratio_p99": loud["p99"] / quiet["p99"],
                    }
                )
    finally:
        relay.close()
        floor.close()
    return rows


def stranger_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"{'honest get_objects_summary beside another process (no token)':<50} {'quiet p50':>9} {'p99':>7}"
        f" {'loud p50':>9} {'p99':>7} {'p99 x':>6} {'lost':>5}"
    ]
    for r in rows:
        q, loud = r["quiet"], r["loud"]
        lines.append(
            f"{r['attack'] + ', ' + r['path']:<50} {q['p50']:>9.2f} {q['p99']:>7.2f}"
            f" {loud['p50']:>9.2f} {loud['p99']:>7.2f} {r['ratio_p99']:>6.2f} {loud['lost']:>5}"
        )
    return lines


def dispatch_hop(n: int) -> dict[str, float]:
    """Thread -> main -> thread through the add-on's own dispatcher, in this process (bpy imported)."""
    import importlib
    from unittest import mock

    from hermes_blender.blender_host import ADDON_MODULE, enable_extension, private_user_folder
    from hermes_blender.resources import ADDON_SOURCE

    with (
        tempfile.TemporaryDirectory() as folder,  # the Blenders this run starts later must not inherit it
        mock.patch.dict(os.environ, BLENDER_USER_RESOURCES=str(private_user_folder(Path(folder) / "user"))),
    ):
        enable_extension(ADDON_SOURCE)
        dispatch = importlib.import_module(f"{ADDON_MODULE}.dispatch")
        dispatcher = dispatch.QueuedDispatcher()
        box: dict[str, Any] = {}

        def client() -> None:
            box["stats"] = timed(lambda: dispatcher.submit(lambda: None).wait(10), n)
            dispatcher.request_stop()

        thread = threading.Thread(target=client)
        thread.start()
        dispatcher.pump_until_stopped(poll=0.5)
        thread.join()
        return box["stats"]


def time_to_ready(runs: int) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            runtime_file = Path(folder) / "server.json"
            started = time.perf_counter()
            with HeadlessBlender(runtime_file, lab_port=None):
                asyncio.run(BridgeClient(RuntimeFileSpec(path=str(runtime_file))).call_tool("get_objects_summary"))
                samples.append(time.perf_counter() - started)
    return percentiles(samples)


SCENE_CODE = """import bpy
bpy.ops.wm.read_homefile(use_empty=True)
scene = bpy.context.scene
bpy.data.meshes.new('shared')
for n in range(1 if {spread} > 1 else 0, {spread}):
    scene.collection.children.link(bpy.data.collections.new(f'part_{{n:03d}}'))
result = {{}}
"""
ADD_CODE = """import bpy
scene = bpy.context.scene
homes = [scene.collection] if {spread} == 1 else [scene.collection, *scene.collection.children]
mesh, new = bpy.data.meshes['shared'], bpy.data.objects.new
for i in range({start}, {end}):
    homes[i % len(homes)].objects.link(new(f'obj_{{i:07d}}', mesh if i % 2 else None))
result = {{}}
"""
"""A scene is built in steps of 100,000 objects: each step is one request, well inside a job's deadline."""


PAGE_OBJECTS_CODE = """import bpy
view_layer = bpy.context.view_layer
def walk(collection):
    yield collection
    for child in sorted(collection.children, key=lambda c: c.name):
        yield from walk(child)
start, wanted, found = 0, range({offset}, {offset} + 100), []
for collection in walk(bpy.context.scene.collection):
    count = len(collection.objects)
    lo, hi = max(wanted.start, start), min(wanted.stop, start + count)
    if lo < hi:
        found += list(collection.objects[lo - start : hi - start])
    start += count
"""
"""The 100 objects of the default page at `offset`, found the way the floors' readers are given them (untimed)."""
FLOOR_CODE = (
    PAGE_OBJECTS_CODE
    + """import importlib, time
samples, tool_samples = [], []
tool = importlib.import_module({tools!r}).objects_summary
for _ in range(20):
    started = time.perf_counter()
    page = [
        (o.name, o.type, o.parent.name if o.parent else None, o.data.name if o.data else None,
         o.select_get(view_layer=view_layer), o.visible_get(view_layer=view_layer), o.hide_get(view_layer=view_layer),
         o.instance_collection.name if o.type == 'EMPTY' and o.instance_collection else None)
        for o in found
    ]
    samples.append(time.perf_counter() - started)
    started = time.perf_counter()
    tool({{'offset': {offset}}})
    tool_samples.append(time.perf_counter() - started)
result = {{'p50': sorted(samples)[10] * 1000, 'tool_p50': sorted(tool_samples)[10] * 1000, 'objects': len(found)}}
"""
)
HTTP_FLOOR_REQUESTS = 22
HTTP_FLOOR_CODE = (
    PAGE_OBJECTS_CODE
    + """import json, os, socket
def entry(o):
    return {{
        'name': o.name, 'type': o.type, 'parent': o.parent.name if o.parent else None,
        'data_name': o.data.name if o.data else None, 'selected': o.select_get(view_layer=view_layer),
        'visible': o.visible_get(view_layer=view_layer), 'hide_viewport': o.hide_get(view_layer=view_layer),
        **({{'instance_collection': o.instance_collection.name}} if o.type == 'EMPTY' and o.instance_collection else {{}}),
    }}
server = socket.create_server(('127.0.0.1', 0))
server.settimeout(60)
with open({port_file!r} + '.part', 'w') as told:
    told.write(str(server.getsockname()[1]))
os.replace({port_file!r} + '.part', {port_file!r})
conn, _ = server.accept()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
reader = conn.makefile('rb')
for _ in range({requests}):
    length = 0
    while (line := reader.readline()) not in (b'\\r\\n', b''):
        if line.lower().startswith(b'content-length:'):
            length = int(line.split(b':')[1])
    reader.read(length)
    body = json.dumps([entry(o) for o in found]).encode()
    conn.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n' % len(body) + body)
conn.close()
server.close()
result = {{}}
"""
)
"""The page's physical floor through HTTP: the simplest server that could answer, inside Blender on its main thread
(one keep-alive connection, no framework, no envelope), reading the same 100 objects' fields per request and
sending them as JSON once. Served from one `execute_blender_code` call while the bench times its requests."""


DETAIL_FLOOR_CODE = """import bpy, time
obj, view_layer, samples = bpy.data.objects[{name!r}], bpy.context.view_layer, []
for _ in range(10):
    started = time.perf_counter()
    detail = (
        obj.name, obj.type, obj.data.name if obj.data else None, tuple(obj.location), obj.rotation_mode,
        tuple(obj.rotation_euler), tuple(obj.rotation_quaternion), tuple(obj.scale), tuple(obj.dimensions),
        obj.parent.name if obj.parent else None, sorted(c.name for c in obj.children),
        [(m.name, m.type, m.show_viewport, m.show_render) for m in obj.modifiers],
        [(c.name, c.type, c.enabled) for c in obj.constraints],
        [s.material.name if s.material else None for s in obj.material_slots],
        obj.visible_get(view_layer=view_layer), obj.hide_viewport, obj.hide_render, obj.hide_get(view_layer=view_layer),
        [c.name for c in obj.users_collection],
    )
    samples.append(time.perf_counter() - started)
result = {{'p50': sorted(samples)[5] * 1000}}
"""
"""The detail's floor: bpy reading the same fields of the same object inside Blender, its lookup untimed. Blender's
own `children` and `users_collection` are walks over every object, so this floor grows with the file."""
NO_WALKS = [
    field
    for tool in shipped_catalogue()
    if tool["name"] == "get_object_detail_summary"
    for field in tool["inputSchema"]["properties"]["fields"]["items"]["enum"]
    if field not in ("children", "collections")
]
"""The detail's fields that Blender reads without a walk over the file (all but children and collections)."""


def scale_table(sizes: list[int]) -> list[dict[str, Any]]:
    """get_objects_summary and get_object_detail_summary on flat scenes (every object in the scene collection, as
    imports make them) and spread ones (100 collections), beside bpy reading the same fields of the same objects
    inside Blender, untimed lookup apart (the floor: those 100 objects' fields read into tuples). Rows: p50 ms of
    the default page at offset 0, the middle and the last page, and `limit=1`; the detail of a middle object right
    after a change, whole and without the two fields Blender walks the file for, beside bpy reading the same detail
    in Blender; the page's HTTP floor (the simplest server in Blender answering those objects' fields); the default
    answer's text characters. A new Blender per row: reading the empty file over a
    million objects cost Blender 5 GiB more within seconds, which is Blender's, not the bridge's."""

    rows = []
    for shape, spread in (("flat", 1), ("spread", 100)):
        for size in sizes:
            with tempfile.TemporaryDirectory() as folder:
                runtime_file = Path(folder) / "server.json"
                with HeadlessBlender(runtime_file):
                    endpoint = read_live_endpoint(RuntimeFileSpec(path=str(runtime_file)))
                    rows.append(_scale_row(endpoint, shape, spread, size, memory=size == sizes[-1] and shape == "flat"))
    return rows


def _scale_row(endpoint: Any, shape: str, spread: int, size: int, *, memory: bool) -> dict[str, Any]:
    import psutil

    link = KeepAlive(endpoint.port, endpoint.headers(), timeout=300.0)

    def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        reply = json.loads(link.post("/mcp", *modern_request("tools/call", {"name": name, "arguments": arguments})))
        return reply["result"]

    def p50(name: str, arguments: dict[str, Any], n: int = 20) -> float:
        """The answer as it arrives (its bytes, as the floors' are): a client's parse is the client's."""
        request = modern_request("tools/call", {"name": name, "arguments": arguments})
        return timed(lambda: link.post("/mcp", *request), n, warmup=2)["p50"]

    started = time.perf_counter()
    call("execute_blender_code", {"code": SCENE_CODE.format(spread=spread)})
    for step in range(0, size, 100_000):
        call(
            "execute_blender_code", {"code": ADD_CODE.format(spread=spread, start=step, end=min(size, step + 100_000))}
        )
    built = time.perf_counter() - started
    first = call("get_objects_summary", {})
    middle, last = size // 2, max(0, size - 100)
    name = f"obj_{middle:07d}"
    change = {"code": f"import bpy\nbpy.data.objects['{name}'].location.x += 1\nresult = {{}}"}
    detail_samples = []
    for _ in range(10):
        call("execute_blender_code", change)
        before = time.perf_counter()
        call("get_object_detail_summary", {"name": name})
        detail_samples.append(time.perf_counter() - before)
    no_walks = []
    for _ in range(10):
        call("execute_blender_code", change)
        before = time.perf_counter()
        call("get_object_detail_summary", {"name": name, "fields": NO_WALKS})
        no_walks.append(time.perf_counter() - before)
    unseen = []  # objects no page showed and no detail found: Blender's own walk finds them
    for i in range(5):
        call("execute_blender_code", change)
        before = time.perf_counter()
        call("get_object_detail_summary", {"name": f"obj_{size // 3 + 2 * i + 1:07d}"})
        unseen.append(time.perf_counter() - before)
    call("get_objects_summary", {})  # the counts again after the changes
    http_floor = _http_floor(call, middle)
    code = FLOOR_CODE.format(offset=middle, tools=f"{ADDON_MODULE}.tools.scene")
    floor = call("execute_blender_code", {"code": code})["structuredContent"]["result"]
    row = {
        "shape": shape,
        "objects": size,
        "build_s": built,
        "first": p50("get_objects_summary", {}),
        "middle": p50("get_objects_summary", {"offset": middle}),
        "last": p50("get_objects_summary", {"offset": last}),
        "limit_1": p50("get_objects_summary", {"offset": middle, "limit": 1}),
        "detail_after_change": percentiles(detail_samples)["p50"],
        "detail_unseen": percentiles(unseen)["p50"],
        "detail_no_walks": percentiles(no_walks)["p50"],
        "detail_floor": call("execute_blender_code", {"code": DETAIL_FLOOR_CODE.format(name=name)})[
            "structuredContent"
        ]["result"]["p50"],
        "default_text_chars": len(first["content"][0]["text"]),
        "floor": floor["p50"],
        "in_blender": floor["tool_p50"],
        "http_floor": http_floor,
    }
    if memory:
        process = psutil.Process(endpoint.pid)
        before_rss = process.memory_info().rss
        for i in range(10_000):
            call("get_objects_summary", {"offset": (i * 997) % size})
        row["rss_growth_mib_10k_calls"] = (process.memory_info().rss - before_rss) / 2**20
    return row


MOVE_CODE = "import bpy\nbpy.context.view_layer.objects.active.location.x += 1\nresult = {}"
NOOP_CODE = "result = {'n': 1}"
BLENDER_STEP_CODE = """import bpy, time
obj, samples = bpy.context.view_layer.objects.active, []
for _ in range({n}):
    started = time.perf_counter()
    obj.location.x += 1
    bpy.context.evaluated_depsgraph_get()
    bpy.ops.ed.undo_push(message='floor')
    samples.append(time.perf_counter() - started)
result = {{'p50': sorted(samples)[len(samples) // 2] * 1000}}
"""
"""Blender's own share of a change that is told and undoable, inside Blender with no request: the depsgraph
evaluated after a move (what names what changed) and one undo step (what takes it back)."""
PLAIN_SAVE_CODE = "import bpy\nbpy.ops.wm.save_as_mainfile(filepath={path!r}, copy=True, compress=False)\nresult = {{}}"
PLAIN_OPEN_CODE = "import bpy\nbpy.ops.wm.open_mainfile(filepath={path!r})\nresult = {{}}"


MONTAGE_FLOOR_CODE = """import bpy, math, os, tempfile
from mathutils import Vector
scene, render = bpy.context.scene, bpy.context.scene.render
data = bpy.data.cameras.new('floor')
camera = bpy.data.objects.new('floor', data)
scene.collection.objects.link(camera)
data.type, data.ortho_scale = 'ORTHO', 20.0
saved = (scene.camera, render.engine, render.resolution_x, render.resolution_y, render.filepath)
scene.camera, render.engine, render.resolution_x, render.resolution_y = camera, 'BLENDER_WORKBENCH', 256, 256
folder = tempfile.mkdtemp()
for index, (azimuth, elevation) in enumerate(((0, 0), (90, 0), (0, 89.9), (45, 35))):
    a, e = math.radians(azimuth), math.radians(elevation)
    direction = Vector((math.sin(a) * math.cos(e), -math.cos(a) * math.cos(e), math.sin(e)))
    camera.location = direction * 30
    camera.rotation_euler = direction.to_track_quat('Z', 'Y').to_euler()
    render.filepath = os.path.join(folder, f'{{index}}.png')
    bpy.ops.render.render(write_still=True)
scene.camera, render.engine, render.resolution_x, render.resolution_y, render.filepath = saved
bpy.data.objects.remove(camera)
bpy.data.cameras.remove(data)
result = {{}}
"""
"""The montage's floor: four Workbench renders of 256x256 by bpy directly, in one request (no framing, no labels,
no grid, no PNG of our own), the camera made and removed as the montage does."""


def montage_beside_floor(call: Callable[[str, dict[str, Any]], dict[str, Any]], runs: int) -> dict[str, float]:
    """A four-view 256x256 montage beside MONTAGE_FLOOR_CODE, alternated after one warm-up each: p50 seconds."""
    montage = lambda: call("get_view_montage", {"tile_size": 256})  # noqa: E731
    floor = lambda: call("execute_blender_code", {"code": MONTAGE_FLOOR_CODE.format()})  # noqa: E731
    montage(), floor()
    samples: dict[str, list[float]] = {"montage": [], "floor": []}
    for _ in range(runs):
        for name, fn in (("floor", floor), ("montage", montage)):
            started = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - started)
    return {name: sorted(values)[len(values) // 2] for name, values in samples.items()}


def history_table(sizes: list[int], n: int) -> list[dict[str, Any]]:
    """What telling and recording a change costs as scenes grow: `execute_blender_code` moving the active object
    and a call that changes nothing, alternated, at each size beside the same calls at the first size (ratios),
    and beside Blender's own evaluation and undo step for the same move (BLENDER_STEP_CODE); then a checkpoint's
    save and restore beside a plain copy save and open of the same file, alternated, in the same Blender."""
    rows: list[dict[str, Any]] = []
    for size in sizes:
        with tempfile.TemporaryDirectory() as folder:
            runtime_file = Path(folder) / "server.json"
            with HeadlessBlender(runtime_file):
                endpoint = read_live_endpoint(RuntimeFileSpec(path=str(runtime_file)))
                rows.append(_history_row(endpoint, size, n if size < 100_000 else max(3, n // 4), Path(folder)))
    first = rows[0]
    for row in rows:
        row["move_ratio_to_first"] = row["move"] / first["move"]
        row["noop_ratio_to_first"] = row["noop"] / first["noop"]
    return rows


def _history_row(endpoint: Any, size: int, n: int, folder: Path) -> dict[str, Any]:
    link = KeepAlive(endpoint.port, endpoint.headers(), timeout=600.0)

    def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        reply = json.loads(link.post("/mcp", *modern_request("tools/call", {"name": name, "arguments": arguments})))
        assert not reply["result"]["isError"], reply
        return reply["result"]

    def code(text: str) -> Callable[[], object]:
        request = modern_request("tools/call", {"name": "execute_blender_code", "arguments": {"code": text}})
        return lambda: link.post("/mcp", *request)

    call("execute_blender_code", {"code": SCENE_CODE.format(spread=1)})
    for step in range(0, size, 100_000):
        call("execute_blender_code", {"code": ADD_CODE.format(spread=1, start=step, end=min(size, step + 100_000))})
    call("execute_blender_code", {"code": "bpy.context.view_layer.objects.active = bpy.data.objects['obj_0000001']"})
    import psutil

    process = psutil.Process(endpoint.pid)
    move, noop = paired(code(MOVE_CODE), code(NOOP_CODE), n, warmup=3)
    rss = process.memory_info().rss
    for _ in range(10):
        code(MOVE_CODE)()
    step_mib = (process.memory_info().rss - rss) / 2**20 / 10
    blender = call("execute_blender_code", {"code": BLENDER_STEP_CODE.format(n=n)})["structuredContent"]["result"]
    row: dict[str, Any] = {
        "objects": size,
        "move": move["p50"],
        "noop": noop["p50"],
        "blender_step": blender["p50"],
        "rss_mib_per_step": step_mib,
    }
    if size <= 100_000:
        shown = montage_beside_floor(call, 5 if size <= 1_000 else 3)
        row.update(montage_s=shown["montage"], montage_floor_s=shown["floor"])
    if size <= 100_000:
        plain = str(folder / "plain.blend")
        checkpoint = {"name": "bench"}
        runs = max(3, n // 4) if size <= 1_000 else 3
        saved, plain_saved = paired(
            lambda: call("save_checkpoint", checkpoint), code(PLAIN_SAVE_CODE.format(path=plain)), runs, warmup=2
        )
        restored, plain_opened = paired(
            lambda: call("restore_checkpoint", checkpoint), code(PLAIN_OPEN_CODE.format(path=plain)), runs, warmup=1
        )
        row.update(
            checkpoint_save=saved["p50"],
            plain_save=plain_saved["p50"],
            checkpoint_restore=restored["p50"],
            plain_open=plain_opened["p50"],
        )
    return row


def history_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "Change summaries and the agent's history (p50 ms; execute_blender_code through keep-alive HTTP, alternated)",
        f"{'objects':>9} {'move':>9} {'x first':>8} {'no-op':>8} {'x first':>8} {'Blender eval+undo':>18}"
        f" {'ckpt save':>10} {'plain save':>11} {'ckpt restore':>13} {'plain open':>11}"
        f" {'montage s':>10} {'4 renders s':>12} {'MiB/step':>9}",
    ]
    for row in rows:
        extra = (
            f" {row['checkpoint_save']:>10.1f} {row['plain_save']:>11.1f} {row['checkpoint_restore']:>13.1f}"
            f" {row['plain_open']:>11.1f}"
            if "checkpoint_save" in row
            else ""
        )
        if "montage_s" in row:
            extra += f" {row['montage_s']:>10.2f} {row['montage_floor_s']:>12.2f}"
        extra += f" {row['rss_mib_per_step']:>9.1f}"
        lines.append(
            f"{row['objects']:>9,} {row['move']:>9.2f} {row['move_ratio_to_first']:>7.2f}x {row['noop']:>8.2f}"
            f" {row['noop_ratio_to_first']:>7.2f}x {row['blender_step']:>18.2f}{extra}"
        )
    return lines


def _http_floor(call: Callable[[str, dict[str, Any]], dict[str, Any]], offset: int) -> float:
    """p50 ms of the page's HTTP floor (HTTP_FLOOR_CODE), its server held open by a call on another thread."""
    with tempfile.TemporaryDirectory() as folder:
        port_file = Path(folder) / "port"
        code = HTTP_FLOOR_CODE.format(offset=offset, port_file=str(port_file), requests=HTTP_FLOOR_REQUESTS)
        served: list[dict[str, Any]] = []
        serving = threading.Thread(target=lambda: served.append(call("execute_blender_code", {"code": code})))
        serving.start()
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if not serving.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP floor never listened: {served}")
            time.sleep(0.01)
        floor = KeepAlive(int(port_file.read_text()), {})
        p50 = timed(lambda: floor.post("/", b"{}"), HTTP_FLOOR_REQUESTS - 2, warmup=2)["p50"]
        floor.conn.close()
        serving.join(60)
        if not served or served[0].get("isError"):
            raise RuntimeError(f"the HTTP floor failed: {served}")
        return p50


# --- the official Blender Lab stack, from a source checkout ------------------------------------

OFFICIAL_SERVER = ["uv", "run", "--no-project", "--quiet", "--with", "mcp[cli]>=1.2.0,<2"]
OFFICIAL_SERVER += ["--with", "docutils", "--with", "pyyaml", "python", "-m", "blmcp"]
"""Its own dependencies (mcp/pyproject.toml at upstream 4309a39; it imports FastMCP, gone in mcp 2)."""
OFFICIAL_ADDON = (
    "import sys\nsys.path.insert(0, {addon!r})\nimport bpy\nfrom blender_mcp_addon import cli\n"
    "sys.exit(cli.cli_execute(['--host', '127.0.0.1', '--port', {port!r}]))"
)


OFFICIAL_CALLS = {"get_objects_summary": {}, "execute_blender_code": {"code": "result = {}"}}
"""What the official server is asked, the same for every target: its own snippet for the summary, agent code."""
READY_FLOOR = (
    "import socket\nimport bpy\nsock = socket.create_server(('127.0.0.1', {port}))\nconn, _ = sock.accept()\n"
    "data = b''\nwhile b'\\0' not in data:\n    data += conn.recv(65536)\n"
    'conn.sendall(b\'{{"status":"ok","result":{{}}}}\\0\')\nconn.close()\nsock.close()'
)
"""The floor of a Blender process's start: import bpy, listen, answer one Lab request, nothing else."""


def official_stack(checkout: Path, n: int, ready_samples: int) -> dict[str, dict[str, float]]:
    """The official server (stdio, its own venv) in front of three targets alive at once: its own add-on (in this
    bpy, its background loop), our Lab listener (a background Blender as `serve` starts it) and a raw TCP echo (the
    floor of the server itself). One session per target; the calls alternate target by target, call by call, the
    order rotating each round, so every target meets the same machine. Then the time each takes to answer its first request, alternated too.
    Nothing of the checkout is kept here."""
    stats: dict[str, dict[str, float]] = {}
    port = _free_port()
    addon = subprocess.Popen(
        [sys.executable, "-c", OFFICIAL_ADDON.format(addon=str(checkout / "addon"), port=str(port))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    echo = InlineFloor()
    try:
        _wait_for_port(port)
        with tempfile.TemporaryDirectory() as folder, HeadlessBlender(Path(folder) / "server.json", lab_port=0):
            lab_port = int(json.loads((Path(folder) / "server.json").read_text())["lab"].rsplit(":", 1)[1])
            targets = {"official": port, "ours": lab_port, "floor": echo.port}
            figures = _through_official_server(checkout, targets, n)
            direct = _direct_lab({"official": port, "ours": lab_port}, 4 * n)
    finally:
        echo.close()
        addon.terminate()
        addon.wait(30)
    floor = figures["floor"]["execute_blender_code"]
    stats["floor: official server -> raw TCP echo: execute_blender_code"] = floor
    for tool in OFFICIAL_CALLS:
        official, ours = figures["official"][tool], figures["ours"][tool]
        if tool == "execute_blender_code":
            official = {**official, "ratio_p50": official["p50"] / floor["p50"]}
            ours = {**ours, "ratio_p50": ours["p50"] / floor["p50"]}
        stats[f"official stack: {tool} (official server -> official add-on)"] = official
        stats[f"official server -> our Lab listener: {tool}"] = {
            **ours,
            "vs_official_p50": ours["p50"] / official["p50"],
            "vs_official_p95": ours["p95"] / official["p95"],
        }
    stats["raw Lab client -> official add-on: execute_blender_code"] = direct["official"]
    stats["raw Lab client -> our Lab listener: execute_blender_code"] = {
        **direct["ours"],
        "vs_official_p50": direct["ours"]["p50"] / direct["official"]["p50"],
        "vs_official_p95": direct["ours"]["p95"] / direct["official"]["p95"],
    }
    stats.update(ready_beside_official(checkout, ready_samples))
    return stats


def _direct_lab(targets: dict[str, int], n: int) -> dict[str, dict[str, float]]:
    """The same `execute` as the official server sends it, from a raw client (connect, send, read to the NUL,
    close): each add-on's own part of a request without the server's 5 ms around it, alternated (`paired`)."""
    code = OFFICIAL_CALLS["execute_blender_code"]["code"]
    request = json.dumps({"type": "execute", "code": code, "strict_json": False}).encode() + b"\0"

    def execute(name: str) -> Callable[[], None]:
        def once() -> None:
            if b'"ok"' not in (reply := lab_exchange(targets[name], request)):
                raise RuntimeError(f"the raw Lab client's execute failed at {name}: {reply[:200]!r}")

        return once

    official, ours = paired(execute("official"), execute("ours"), n, warmup=50)
    return {"official": official, "ours": ours}


def _through_official_server(checkout: Path, targets: dict[str, int], n: int) -> dict[str, dict[str, dict[str, float]]]:
    from contextlib import AsyncExitStack

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    def server(port: int) -> StdioServerParameters:
        return StdioServerParameters(
            command=OFFICIAL_SERVER[0],
            args=OFFICIAL_SERVER[1:],
            env={**os.environ, "BLENDER_MCP_HOST": "127.0.0.1", "BLENDER_MCP_PORT": str(port)},
            cwd=str(checkout / "mcp"),
        )

    async def run() -> dict[str, dict[str, list[float]]]:
        samples: dict[str, dict[str, list[float]]] = {name: {tool: [] for tool in OFFICIAL_CALLS} for name in targets}
        with open(os.devnull, "w") as quiet:  # the server logs every request to stderr
            async with AsyncExitStack() as stack:
                sessions = {}
                for name, port in targets.items():
                    read, write = await stack.enter_async_context(stdio_client(server(port), errlog=quiet))
                    sessions[name] = await stack.enter_async_context(ClientSession(read, write))
                    await sessions[name].initialize()
                names = list(sessions)
                for i in range(n + 10):
                    order = names[i % len(names) :] + names[: i % len(names)]  # each target first, second, last
                    for tool, arguments in OFFICIAL_CALLS.items():
                        for name in order:
                            session = sessions[name]
                            if name == "floor" and tool != "execute_blender_code":
                                continue  # the echo answers an empty result, which only the code tool passes on
                            started = time.perf_counter()
                            result = await session.call_tool(tool, arguments)
                            elapsed = time.perf_counter() - started
                            if result.is_error:
                                raise RuntimeError(f"{tool} failed through the official server: {result.content}")
                            if i >= 10:
                                samples[name][tool].append(elapsed)
        return samples

    return {
        name: {tool: percentiles(times) for tool, times in tools.items() if times}
        for name, tools in asyncio.run(run()).items()
    }


def ready_beside_official(checkout: Path, samples: int) -> dict[str, dict[str, float]]:
    """Process start -> the first answered Lab `execute`, alternated: the floor (import bpy, listen, answer), the
    official add-on (its background loop, as OFFICIAL_ADDON starts it) and ours the way `hermes-blender serve`
    starts it (HeadlessBlender: a background Blender, the add-on enabled in a private folder, the runtime file
    published, the Lab listener on). Each is polled the same way, every HeadlessBlender.POLL_INTERVAL; the order
    rotates from one round to the next. All start from bytecode caches (`compiled`), as every start after a user's
    first does."""
    compiled(ROOT / "hermes_blender", ROOT / "blender_addon", checkout / "addon")
    times: dict[str, list[float]] = {"floor": [], "official": [], "ours": []}
    names = list(times)
    for i in range(samples):
        for name in names[i % len(names) :] + names[: i % len(names)]:  # each one first, second and last in turn
            times[name].append(_ready(name, checkout))
    floor, official, ours = (percentiles(times[name]) for name in ("floor", "official", "ours"))
    return {
        "ready floor: import bpy, listen, answer one Lab request": floor,
        "ready: official add-on (start -> first answer)": {**official, "ratio_p50": official["p50"] / floor["p50"]},
        "ready: serve with our Lab listener (start -> runtime file -> first Lab answer)": {
            **ours,
            "ratio_p50": ours["p50"] / floor["p50"],
            "vs_official_p50": ours["p50"] / official["p50"],
            "vs_official_p95": ours["p95"] / official["p95"],
        },
    }


def _ready(name: str, checkout: Path) -> float:
    if name == "ours":
        with tempfile.TemporaryDirectory() as folder:
            runtime_file = Path(folder) / "server.json"
            started = time.perf_counter()
            with HeadlessBlender(runtime_file, lab_port=0):
                lab_port = int(json.loads(runtime_file.read_text())["lab"].rsplit(":", 1)[1])
                lab_exchange(lab_port, READY_REQUEST)
                return time.perf_counter() - started
    port = _free_port()
    if name == "official":
        code = OFFICIAL_ADDON.format(addon=str(checkout / "addon"), port=str(port))
    else:
        code = READY_FLOOR.format(port=port)
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                lab_exchange(port, READY_REQUEST)
                return time.perf_counter() - started
            except ToolCallFailed:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the {name} Blender never answered") from None
                time.sleep(POLL_INTERVAL)
    finally:
        process.terminate()
        process.wait(30)


READY_REQUEST = json.dumps({"type": "execute", "code": "result = {}", "strict_json": False}).encode() + b"\0"


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
}


def compiled(*folders: Path) -> None:
    """Write the bytecode caches every start after a user's first finds (Python writes them on the first import,
    Blender too for add-ons), for `folders` and the installed packages (bpy's own scripts, the SDK), so that no
    start on either side is measured compiling sources: a shell may set PYTHONDONTWRITEBYTECODE (this machine's
    does), and then each start would compile every module it imports."""
    for folder in folders:
        compileall.compile_dir(folder, quiet=1, workers=0)
    for installed in {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}:
        compileall.compile_dir(installed, quiet=2, workers=0)  # a package's test data or templates may not compile


def cold_start(command: list[str]) -> float:
    """Seconds from starting a stdio server to its `initialize` answer (stdin then closed: it ends)."""
    began = time.perf_counter()
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    server.stdin.flush()
    answer = server.stdout.readline()
    took = time.perf_counter() - began
    server.stdin.close()
    server.wait(30)
    assert b'"result"' in answer, answer
    return took


def cold_starts(runs: int) -> dict[str, dict[str, float]]:
    """`hermes-blender mcp` and the minimal SDK server, alternated run by run: ours as a client starts it (the
    console script `connect` writes into its config, a Python file run by this interpreter), the floor as
    `python <file>`.

    Both start from bytecode caches (`compiled`). Start-up is CPU work that noise only lengthens, so the low tail
    (p10, the best run) is reported beside the median: on shared cores the median alone moves by 10% between two
    runs."""
    compiled(ROOT / "hermes_blender")
    ours = [shutil.which("hermes-blender", path=str(Path(sys.executable).parent)) or "hermes-blender", "mcp"]
    floor = [sys.executable, str(ROOT / "scripts" / "minimal_stdio_server.py")]
    samples: dict[str, list[float]] = {"hermes-blender mcp": [], "minimal SDK server": []}
    commands = {"hermes-blender mcp": ours, "minimal SDK server": floor}
    for run in range(runs):  # which starts first alternates too: the second may find the disk cache warmer
        for name in sorted(commands, reverse=bool(run % 2)):
            samples[name].append(cold_start(commands[name]))
    return {
        name: {**percentiles(values), "p10": sorted(values)[len(values) // 10] * 1000, "best": min(values) * 1000}
        for name, values in samples.items()
    }


def cold_start_lines(rows: dict[str, dict[str, float]]) -> list[str]:
    floor = rows["minimal SDK server"]
    return [
        f"{name:<22} "
        + "  ".join(f"{stat} {row[stat]:6.1f} ms ({row[stat] / floor[stat]:.2f}x)" for stat in ("p50", "p10", "best"))
        + f"  {row['n']} runs"
        for name, row in rows.items()
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, timeout: float = 60.0) -> None:
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


def scale_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The scale table as printed."""
    lines: list[str] = []
    lines.append(
        f"{'scene':<16}{'objects':>9}{'page 0':>9}{'middle':>9}{'last':>9}{'limit=1':>9}{'detail*':>9}{'unseen':>9}"
        f"{'no walk':>9}{'det.fl':>8}{'floor':>8}{'in Bl.':>8}{'in/floor':>9}{'http fl':>8}{'mid/http':>9}"
        f"{'mid/floor':>10}{'chars':>8}"
    )
    for s in rows:
        lines.append(
            f"{s['shape']:<16}{s['objects']:>9}{s['first']:>9.2f}{s['middle']:>9.2f}{s['last']:>9.2f}"
            f"{s['limit_1']:>9.2f}{s['detail_after_change']:>9.2f}{s['detail_unseen']:>9.2f}"
            f"{s['detail_no_walks']:>9.2f}{s['detail_floor']:>8.2f}{s['floor']:>8.2f}"
            f"{s['in_blender']:>8.2f}{s['in_blender'] / s['floor']:>9.2f}{s['http_floor']:>8.2f}"
            f"{s['middle'] / s['http_floor']:>9.2f}{s['middle'] / s['floor']:>10.2f}{s['default_text_chars']:>8}"
        )
    lines.append("p50 ms; detail* = get_object_detail_summary right after a change (an object seen before); unseen =")
    lines.append("the same for objects no page showed; no walk = the detail without children and collections (the")
    lines.append(
        "fields Blender finds by a walk over every object); det.fl = bpy reading the detail's fields in Blender;"
    )
    lines.append("floor = bpy reading the same fields of 100 objects in Blender;")
    lines.append("in Bl. = the middle page's tool call inside Blender; http fl = the simplest HTTP server in Blender")
    lines.append(
        "reading and sending those 100 objects' fields as JSON (keep-alive); chars = the default answer's text"
    )
    for s in rows:
        if "rss_growth_mib_10k_calls" in s:
            lines.append(
                f"Blender's memory over 10,000 page calls ({s['objects']} objects): {s['rss_growth_mib_10k_calls']:+.1f} MiB"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    parser.add_argument(
        "--python", action="append", type=Path, help="run under this interpreter (a bpy line's venv); repeat to compare"
    )
    parser.add_argument(
        "--official-stack",
        type=Path,
        metavar="CHECKOUT",
        help="also run the official Blender Lab stack from this source checkout (upstream 4309a39), beside ours",
    )
    parser.add_argument(
        "--official-only", action="store_true", help="with --official-stack: only the official stack's rows"
    )
    parser.add_argument(
        "--million", action="store_true", help="add 1,000,000-object scenes to the scale table (minutes, about 4 GiB)"
    )
    parser.add_argument(
        "--scale-only", action="store_true", help="only the scale table (big scenes), a Blender per row"
    )
    parser.add_argument(
        "--history-only",
        action="store_true",
        help="only the change summaries' and checkpoints' table, a Blender per row",
    )
    parser.add_argument(
        "--cold-start-only",
        action="store_true",
        help="only `hermes-blender mcp`'s start to its initialize answer, beside the minimal SDK stdio server",
    )
    parser.add_argument(
        "--farm-only",
        action="store_true",
        help="only the farm rows: `farm run` of a bundle beside `blender -b FILE -a`, calls during a farm run",
    )
    parser.add_argument(
        "--api-only", action="store_true", help="only the API look-up's and a successful code call's cost"
    )
    parser.add_argument(
        "--modes-only", action="store_true", help="only the agent's mode's cost in full mode (the consent check)"
    )
    parser.add_argument("--flood", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument(
        "--strangers-only", action="store_true", help="only the honest calls beside another process's attacks"
    )
    args = parser.parse_args(argv)
    if args.strangers_only:
        with tempfile.TemporaryDirectory() as folder, HeadlessBlender(Path(folder) / "server.json") as blender:
            assert blender.endpoint is not None
            rows = under_strangers(
                blender.runtime_file, blender.endpoint.port, blender.endpoint.headers(), 50 if args.quick else 200
            )
        print(json.dumps(rows, indent=2) if args.json else "\n".join(stranger_lines(rows)))
        return 0
    if args.scale_only:
        rows = scale_table(([1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]) + [1_000_000] * args.million)
        print(json.dumps(rows, indent=2) if args.json else "\n".join(scale_lines(rows)))
        return 0
    if args.history_only:
        rows = history_table([1_000, 100_000] + [1_000_000] * args.million, 10 if args.quick else 30)
        print(json.dumps(rows, indent=2) if args.json else "\n".join(history_lines(rows)))
        return 0
    if args.cold_start_only:
        rows = cold_starts(5 if args.quick else 41)
        print(json.dumps(rows, indent=2) if args.json else "\n".join(cold_start_lines(rows)))
        return 0
    if args.api_only:
        report = api_table(100 if args.quick else 1000, paired, KeepAlive)
        print(json.dumps(report, indent=2) if args.json else "\n".join(api_lines(report)))
        return 0
    if args.modes_only:
        report = modes_table(200 if args.quick else 2000, paired, timed, KeepAlive)
        print(json.dumps(report, indent=2) if args.json else "\n".join(modes_lines(report)))
        return 0
    if args.farm_only:
        report = farm_table(50 if args.quick else 200, timed, KeepAlive)
        print(json.dumps(report, indent=2) if args.json else "\n".join(farm_lines(report)))
        return 0
    if args.flood is not None:
        flood(args.flood)
        return 0
    if args.python:
        return compare_lines(args.python, quick=args.quick, as_json=args.json)
    if args.official_only:
        if args.official_stack is None:
            parser.error("--official-only needs --official-stack CHECKOUT")
        rows = official_stack(args.official_stack.resolve(), 100 if args.quick else 500, 3 if args.quick else 10)
        rows.update(hermes_beside_official(args.official_stack.resolve(), 30 if args.quick else 100))
        report = {"machine": machine(), "latency": rows}
        print(json.dumps(report, indent=2) if args.json else "\n".join(official_lines(report)))
        return 0
    n = 200 if args.quick else 1000
    report: dict[str, Any] = {"machine": machine(), "latency": {}, "throughput": [], "scale": []}
    latency = report["latency"]

    tcp_floor, threaded_floor, http_floor = InlineFloor(), Floor(nul_echo), Floor(http_echo)
    lab_payload = json.dumps({"type": "execute", "code": "result = {}", "strict_json": True}).encode() + b"\0"
    tcp = lambda: lab_exchange(tcp_floor.port, lab_payload)  # noqa: E731
    echo = KeepAlive(http_floor.port, {})
    http = lambda: echo.post("/mcp", SUMMARY)  # noqa: E731
    floors = {
        tcp: "floor: raw TCP echo, one connection per request, answered inline by one thread",
        http: "floor: raw HTTP keep-alive echo",
    }

    def measure(name: str, floor: Callable[[], object], path: Callable[[], object], count: int = n) -> None:
        floor_stats, path_stats = paired(floor, path, count)
        latency.setdefault(floors[floor], floor_stats)
        latency[name] = {**path_stats, "ratio_p50": path_stats["p50"] / floor_stats["p50"]}

    with tempfile.TemporaryDirectory() as folder:
        runtime_file = Path(folder) / "server.json"
        with HeadlessBlender(runtime_file, lab_port=0):
            endpoint = read_live_endpoint(RuntimeFileSpec(path=str(runtime_file)))
            port = int(endpoint.url.rsplit(":", 1)[1].split("/")[0])
            lab_port = int(json.loads(runtime_file.read_text())["lab"].rsplit(":", 1)[1])
            headers = endpoint.headers()
            measure(
                "floor: raw TCP echo, one connection per request, a thread per connection",
                tcp,
                lambda: lab_exchange(threaded_floor.port, lab_payload),
            )
            measure("Lab execute (result = {})", tcp, lambda: lab_exchange(lab_port, lab_payload))
            # Agent-written code is new each time, so the add-on's compile cache never helps it: measured apart.
            fresh = (
                b'{"type":"execute","code":"result = {}  # %d","strict_json":true}\0' % n for n in itertools.count()
            )
            measure("Lab execute (result = {}, new code each call)", tcp, lambda: lab_exchange(lab_port, next(fresh)))
            summary_code = "import bpy\nresult = {'names': sorted(o.name for o in bpy.context.scene.objects)}"
            measure("Lab execute (object names)", tcp, lambda: lab_execute(lab_port, summary_code))
            link = KeepAlive(port, headers)
            measure("MCP tools/call get_objects_summary, keep-alive HTTP", http, lambda: link.post("/mcp", SUMMARY))
            # The same call asking for progress: answered as an event stream (a small call hears no progress).
            measure(
                "MCP tools/call get_objects_summary with a progressToken (event stream), keep-alive HTTP",
                http,
                lambda: link.post("/mcp", STREAMED, STREAMED_HEADERS),
            )
            # The same transport and envelope without a tool: what HTTP, auth and JSON-RPC cost apart from bpy.
            measure("MCP server/discover (no tool), keep-alive HTTP", http, lambda: link.post("/mcp", *DISCOVER))
            latency["MCP get_objects_summary, official client, 2026-07-28"] = official_client_calls(
                runtime_file, "2026-07-28", n // 4
            )
            latency["MCP get_objects_summary, official client, 2025-11-25 session"] = official_client_calls(
                runtime_file, "legacy", n // 4
            )
            for name in list(latency)[-2:]:
                latency[name]["ratio_p50"] = latency[name]["p50"] / latency[floors[http]]["p50"]
            latency[STDIO_ROW] = stdio_beside_direct(runtime_file, n // 4)
            latency["cancel: a client hangs up on a running script -> the next answer"] = cancel_to_stop(
                port, headers, 5 if args.quick else 20
            )
            latency["server/discover while a frame task renders (frames of about 100 ms)"] = beside_a_task(
                port, headers, 20 if args.quick else 100
            )
            latency["cancel: a frame range's stream closed -> the next answer (frame_p50: one frame)"] = (
                cancel_render_to_stop(port, headers, 5 if args.quick else 20)
            )
            for clients in (1, 4, 8):
                report["throughput"].append(throughput(port, headers, clients, n // 2))
            report["flood"] = under_flood(port, headers, n)
            report["strangers"] = under_strangers(runtime_file, port, headers, 50 if args.quick else 200)
            sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
            scale_sizes = sizes + ([1_000_000] if args.million else [])
    for floor in (tcp_floor, threaded_floor, http_floor):
        floor.close()
    report["scale"] = scale_table(scale_sizes)
    report["history"] = history_table([1_000, 100_000] + [1_000_000] * args.million, 10 if args.quick else 30)
    latency["thread -> main -> thread hop (dispatcher)"] = dispatch_hop(n)
    if args.official_stack is not None:
        latency.update(official_stack(args.official_stack.resolve(), n // 5, 3 if args.quick else 7))
        latency.update(hermes_beside_official(args.official_stack.resolve(), n // 10))
    report["time_to_ready"] = time_to_ready(3 if args.quick else 5)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


LINE_COLUMNS = {
    "Lab execute": "Lab execute (result = {})",
    "MCP keep-alive": "MCP tools/call get_objects_summary, keep-alive HTTP",
    "official client": "MCP get_objects_summary, official client, 2026-07-28",
}


def compare_lines(pythons: list[Path], *, quick: bool, as_json: bool) -> int:
    """The benchmark once per interpreter (one after the other, never overlapping), one row each."""
    reports = []
    for python in pythons:
        command = [str(python), __file__, "--json", *(["--quick"] if quick else [])]
        run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        if run.returncode != 0:
            print(f"bench: {python} failed:\n{run.stderr[-2000:]}", file=sys.stderr)
            return run.returncode
        reports.append(json.loads(run.stdout))
    if as_json:
        print(json.dumps(reports, indent=2))
        return 0
    header = f"{'Blender (bpy) / Python':<28}" + "".join(f"{name + ' p50 ms (x floor)':>32}" for name in LINE_COLUMNS)
    print(header + f"{'ready p50 ms':>14}")
    for report in reports:
        cells = []
        for key in LINE_COLUMNS.values():
            s = report["latency"][key]
            cells.append(f"{s['p50']:>20.3f} ({s['ratio_p50']:.2f}x)".rjust(32))
        line = f"{report['machine']['bpy']} / {report['machine']['python']}"
        print(f"{line:<28}{''.join(cells)}{report['time_to_ready']['p50']:>14.0f}")
    return 0


def official_lines(report: dict[str, Any]) -> list[str]:
    """The official stack's rows as printed: the ratio column is ours against the official add-on's."""
    m = report["machine"]
    lines = [f"machine: {m['cpu']}, {m['cores']} cores, {m['os']}, Python {m['python']}, bpy {m['bpy']}", ""]
    width = max(len(name) for name in report["latency"])
    lines.append(
        f"{'path':<{width}} {'p50 ms':>9} {'p95 ms':>9} {'n':>5} {'x floor':>8} {'ours/off p50':>13} {'p95':>6}"
    )
    for name, s in report["latency"].items():
        ratio = f"{s['ratio_p50']:.2f}" if "ratio_p50" in s else ""
        versus = f"{s['vs_official_p50']:>13.2f} {s['vs_official_p95']:>6.2f}" if "vs_official_p50" in s else ""
        lines.append(f"{name:<{width}} {s['p50']:>9.3f} {s['p95']:>9.3f} {s['n']:>5} {ratio:>8} {versus}")
    return lines


def render(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"machine: {m['cpu']}, {m['cores']} cores, {m['os']}, Python {m['python']}, bpy {m['bpy']}, mcp {m['mcp']}",
        "",
    ]
    width = max(64, *(len(name) for name in report["latency"]))
    lines.append(f"{'path':<{width}} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'x floor':>8}")
    for name, s in report["latency"].items():
        ratio = f"{s['ratio_p50']:.2f}" if "ratio_p50" in s else ""
        frame = f"  (one frame {s['frame_p50']:.0f} ms)" if "frame_p50" in s else ""
        if "vs_official_p50" in s:
            frame += f"  (ours/official: p50 {s['vs_official_p50']:.2f}x, p95 {s['vs_official_p95']:.2f}x)"
        lines.append(f"{name:<{width}} {s['p50']:>8.3f} {s['p95']:>8.3f} {s['p99']:>8.3f} {ratio:>8}{frame}")
    lines += ["", f"{'throughput (get_objects_summary, keep-alive HTTP)':<64} {'calls/s':>8} {'errors':>8}"]
    for t in report["throughput"]:
        lines.append(
            f"{str(t['clients']) + ' client(s) x ' + str(t['calls'] // t['clients']) + ' calls':<64} {t['per_second']:>8.0f} {t['errors']:>8}"
        )
    f = report["flood"]
    lines += ["", f"{'honest keep-alive client, get_objects_summary':<64} {'p50 ms':>8} {'p99 ms':>8} {'lost':>8}"]
    for key, label in (("without", "without a flood"), ("with", "under the worst no-token flood (a 2nd process)")):
        lines.append(f"{label:<64} {f[key]['p50']:>8.3f} {f[key]['p99']:>8.3f} {f[key]['lost']:>8}")
    lines.append(f"{'p99 under flood / p99 without':<64} {f['ratio_p99']:>8.2f}")
    rates = ", ".join(f"{rate:.0f} {kind}/s" for kind, rate in f["flood_per_second"].items())
    lines.append(f"the flood reached: {rates} (16 KiB header blocks refused; connections opened and closed)")
    lines += ["", *stranger_lines(report["strangers"])]
    r = report["time_to_ready"]
    lines += [
        "",
        f"time to ready (process start -> runtime file -> first answer): p50 {r['p50']:.0f} ms, max {r['p99']:.0f} ms (n={r['n']})",
        "",
    ]
    lines += scale_lines(report["scale"])
    lines += ["", *history_lines(report["history"])]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
