"""`--history-only`: change summaries, the agent's history, checkpoints and montages, a Blender per row."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_blender.client import modern_request
from hermes_blender.contract.liveness import RuntimeFileSpec, read_live_endpoint
from hermes_blender.headless import HeadlessBlender

from .measure import KeepAlive, paired
from .scale import ADD_CODE, SCENE_CODE

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
