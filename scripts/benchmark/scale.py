"""`--scale-only`: the read tools on big scenes, each beside the same walk written by hand, a Blender per row."""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_blender.blender_host import ADDON_MODULE
from hermes_blender.client import modern_request
from hermes_blender.contract.liveness import RuntimeFileSpec, read_live_endpoint
from hermes_blender.headless import HeadlessBlender
from hermes_blender.stdio_server import shipped_catalogue

from .measure import KeepAlive, percentiles, timed

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
