"""The farm rows of `scripts/bench.py --farm-only`: a job bundle rendered by `hermes-blender farm run` beside
`blender -b FILE -a` of the same frames, and the bridge's calls while a farm run renders beside idle.

Every render here is one Blender program (the GUI tier's, scripts/gui_root.sh, or `blender` on PATH) on the same
saved scene (Cycles on the CPU, 160x120, 16 samples, 24 frames of a moving cube): `-a` renders them in one process;
the plain flavour starts a Blender per chunk (measured with chunks of 8 and of 1, so a start's cost is the
difference over the extra starts); the Deadline adaptor flavour keeps one Blender open under AWS's `blender-openjd`.
The bridge is the bpy wheel's headless Blender, asked while the farm renders in processes of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gui_blender import blender_command

from hermes_blender.client import modern_request
from hermes_blender.contract.liveness import RuntimeFileSpec, read_live_endpoint
from hermes_blender.headless import HeadlessBlender

from .measure import KeepAlive, timed

FRAMES = 24
ADAPTOR = "deadline-cloud-for-blender==0.6.9"
SCENE = """
import bpy
bpy.ops.wm.read_homefile(use_factory_startup=True)
scene = bpy.context.scene
scene.render.engine = "CYCLES"
scene.cycles.samples, scene.cycles.device = 16, "CPU"
scene.render.resolution_x, scene.render.resolution_y = 160, 120
scene.frame_start, scene.frame_end = 1, {frames}
cube = bpy.data.objects["Cube"]
for frame, x in ((1, -2.0), ({frames}, 2.0)):
    cube.location.x = x
    cube.keyframe_insert("location", frame=frame)
bpy.ops.wm.save_as_mainfile(filepath={path!r})
result = {{}}
"""
NOOP, NOOP_HEADERS = modern_request(
    "tools/call", {"name": "execute_blender_code", "arguments": {"code": "result = {}"}}
)


def farm_rows(
    folder: Path,
    connect: Callable[[], Callable[[bytes, dict[str, str]], bytes]],
    call: Callable[[str, dict[str, Any]], dict[str, Any]],
    summary: tuple[bytes, dict[str, str]],
    timed: Callable[[Callable[[], object], int], dict[str, float]],
    n: int,
) -> dict[str, Any]:
    """The rows, given a new keep-alive connection's `post` to the bridge (the bridge closes one left idle while a
    farm renders), a tool `call`, the summary request and bench.py's timer; everything is written in `folder`."""
    blender = os.environ.get("HERMES_GUI_BLENDER") or blender_command()
    if blender is None:
        raise SystemExit("no Blender program here: scripts/gui_root.sh makes the GUI tier's")
    (folder / "project").mkdir()
    blend = folder / "project" / "shot.blend"
    call("execute_blender_code", {"code": SCENE.format(frames=FRAMES, path=str(blend))})
    tools = folder / "bin"
    tools.mkdir()
    adaptor = folder / "adaptor-venv"  # installed as a farm host has it: a start per task costs no resolution
    subprocess.run(["uv", "venv", "-q", "--python", "3.11", str(adaptor)], check=True)
    subprocess.run(  # compiled: where PYTHONDONTWRITEBYTECODE is set, each task would compile the adaptor again
        ["uv", "pip", "install", "-q", "--compile-bytecode", "--python", str(adaptor / "bin" / "python"), ADAPTOR],
        check=True,
    )
    (tools / "blender-openjd").symlink_to(adaptor / "bin" / "blender-openjd")
    uv_cache = subprocess.run(["uv", "cache", "dir"], capture_output=True, text=True, check=True).stdout.strip()
    env = os.environ | {"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}", "HERMES_IN_ROOT_BIND": uv_cache}

    def bundle(name: str, **arguments: Any) -> Path:
        (folder / name / "frames").mkdir(parents=True)
        answer = call(
            "export_render_job",
            {
                "bundle_folder": str(folder / name / "bundle"),
                "output_folder": str(folder / name / "frames"),
                "frames": f"1-{FRAMES}",
                "use_unsaved_changes": True,  # the call that saved is an undo step, which Blender counts as a change
                **arguments,
            },
        )
        return Path(answer["bundle_folder"])

    def farm(path: Path) -> list[str]:
        return [sys.executable, "-m", "hermes_blender.cli", "farm", "run", str(path), "--blender", blender, "--json"]

    def seconds(command: list[str]) -> float:
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"{command[:6]} failed: {done.stdout[-800:]} {done.stderr[-800:]}")
        return time.perf_counter() - started

    (folder / "a").mkdir()
    rows: dict[str, Any] = {}
    animation = seconds([blender, "-b", str(blend), "-o", str(folder / "a" / "frame_####"), "-F", "PNG", "-a"])
    rows[f"blender -b FILE -a, frames 1-{FRAMES}"] = {"seconds": round(animation, 2), "ratio": 1.0}
    runs = {
        "farm run, deadline_adaptor (one Blender kept open, blender-openjd)": bundle(
            "adaptor", flavour="deadline_adaptor"
        ),
        "farm run, plain, chunks of 8 (3 Blender starts)": bundle("plain8", chunk_size=8),
        f"farm run, plain, chunks of 1 ({FRAMES} Blender starts)": bundle("plain1", chunk_size=1),
    }
    for name, path in runs.items():
        took = seconds(farm(path))
        rows[name] = {"seconds": round(took, 2), "ratio": round(took / animation, 2)}
    eight, one = (rows[name]["seconds"] for name in list(rows)[-2:])
    rows["plain flavour: each extra chunk (a Blender start and its file read)"] = {
        "seconds": round((one - eight) / (FRAMES - 3), 2)
    }
    rows.update(_latency(connect(), summary, timed, n, farm(bundle("during", chunk_size=4)), env))
    return {"blender": blender, "rows": rows}


def _latency(
    post: Callable[[bytes, dict[str, str]], bytes],
    summary: tuple[bytes, dict[str, str]],
    timed: Callable[[Callable[[], object], int], dict[str, float]],
    n: int,
    command: list[str],
    env: dict[str, str],
) -> dict[str, Any]:
    """get_objects_summary and a no-op execute_blender_code, idle and while `command` (a farm run) renders."""
    calls = {
        "get_objects_summary": lambda: post(*summary),
        "execute_blender_code (result = {})": lambda: post(NOOP, NOOP_HEADERS),
    }
    idle = {name: timed(fn, n) for name, fn in calls.items()}
    running = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert running.stderr is not None
        for line in running.stderr:  # measured once the first Blender renders
            if "task Frame=" in line:
                break
        during = {name: timed(fn, n) for name, fn in calls.items()}
        still = running.poll() is None
    finally:
        running.terminate()
        running.wait(120)
    rows = {}
    for name in calls:
        rows[f"bridge {name}, p50 ms: idle / during a farm run"] = {
            "idle_ms": round(idle[name]["p50"], 3),
            "during_ms": round(during[name]["p50"], 3),
            "ratio": round(during[name]["p50"] / idle[name]["p50"], 2),
            "farm_still_rendering_at_the_end": still,
        }
    return rows


def farm_lines(report: dict[str, Any]) -> list[str]:
    lines = [f"farm rows (Blender: {report['blender']})"]
    for name, row in report["rows"].items():
        lines.append(f"  {name}: " + ", ".join(f"{key} {value}" for key, value in row.items()))
    return lines


def farm_table(n: int) -> dict[str, Any]:
    """The whole farm table, a headless bridge of its own serving the export and the calls."""
    with tempfile.TemporaryDirectory() as folder, HeadlessBlender(Path(folder) / "server.json") as running:
        endpoint = read_live_endpoint(RuntimeFileSpec(path=str(running.runtime_file)))
        port = int(endpoint.url.rsplit(":", 1)[1].split("/")[0])

        def connect() -> Callable[[bytes, dict[str, str]], bytes]:
            link = KeepAlive(port, endpoint.headers())
            return lambda body, headers: link.post("/mcp", body, headers)

        def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            body, headers = modern_request("tools/call", {"name": name, "arguments": arguments})
            answer = json.loads(connect()(body, headers))["result"]
            if answer.get("isError"):
                raise RuntimeError(answer["content"][0]["text"])
            return answer["structuredContent"]

        summary = modern_request("tools/call", {"name": "get_objects_summary", "arguments": {}})
        return farm_rows(Path(folder), connect, call, summary, timed, n)
