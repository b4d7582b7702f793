"""The full run's latency rows that are not floors: the official client, the stdio hop, cancels, a task beside calls,
the dispatcher's hop and the time to ready."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from hermes_blender.blender_host import ADDON_MODULE
from hermes_blender.client import BridgeClient, modern_request
from hermes_blender.contract.liveness import RuntimeFileSpec, read_live_endpoint
from hermes_blender.headless import HeadlessBlender

from .measure import DISCOVER, KeepAlive, percentiles, timed

FRAMES_SCENE = (
    "import bpy\nscene = bpy.context.scene\nscene.render.resolution_x, scene.render.resolution_y = 64, 48\n"
    "scene.render.engine, scene.cycles.device, scene.cycles.samples = 'CYCLES', 'CPU', 1\n"
    "scene.frame_start, scene.frame_end = 1, 1000\nresult = {}"
)
"""Frames of a fraction of a second each on the CPU, for the render-cancel row."""


@asynccontextmanager
async def official_client(runtime_file: Path, mode: Literal["legacy", "2026-07-28"]) -> AsyncIterator[Client]:
    """The official SDK's client on one kept connection to the bridge the runtime file names, in one era."""
    endpoint = read_live_endpoint(RuntimeFileSpec(path=str(runtime_file)))
    async with httpx2.AsyncClient(headers=endpoint.headers(), timeout=150.0) as http:
        async with Client(streamable_http_client(endpoint.url, http_client=http), mode=mode) as client:
            yield client


def official_client_calls(runtime_file: Path, mode: Literal["legacy", "2026-07-28"], n: int) -> dict[str, float]:
    async def run() -> list[float]:
        samples = []
        async with official_client(runtime_file, mode) as session:
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
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "hermes_blender.cli", "mcp", "--runtime-file", str(runtime_file)]
    )

    async def run() -> tuple[list[float], list[float]]:
        direct_samples: list[float] = []
        stdio_samples: list[float] = []
        async with official_client(runtime_file, "2026-07-28") as direct:
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


def dispatch_hop(n: int) -> dict[str, float]:
    """Thread -> main -> thread through the add-on's own dispatcher, in this process (bpy imported)."""
    import importlib
    from unittest import mock

    from hermes_blender.blender_host import enable_extension, private_user_folder
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
