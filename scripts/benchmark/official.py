"""`--official-stack CHECKOUT`: the official Blender Lab stack from a source checkout, beside ours."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_blender.errors import ToolCallFailed
from hermes_blender.headless import POLL_INTERVAL, HeadlessBlender
from hermes_blender.lab import lab_exchange

from . import ROOT
from .cold_start import compiled
from .measure import InlineFloor, free_port, paired, percentiles, wait_for_port

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
    port = free_port()
    addon = subprocess.Popen(
        [sys.executable, "-c", OFFICIAL_ADDON.format(addon=str(checkout / "addon"), port=str(port))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    echo = InlineFloor()
    try:
        wait_for_port(port)
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
    port = free_port()
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
