"""Tools that need Blender's window: screenshots and jumps. In background mode they say so.

A screenshot is Blender's own (`screen.screenshot`), which reads the window's front buffer. Some
drivers give that back all black (Blender 5.2 on Mesa's llvmpipe: OpenGL without a GPU, as in
virtual machines and CI) while the window shows the scene. Then the regions are read as Blender
draws them next, from its own draw handlers, and put together where they sit on the screen; a
picture that is still one colour is never returned as a screenshot, the error says why.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import bpy

from ..errors import ToolError
from .base import MUTATING, NO_ARGUMENTS, Image, Tool, arguments, shallow
from .context import JobContext
from .pictures import SIZE_LIMIT, fitted, pixels_of, png_bytes
from .python_exec import Deferred

SPACE_TYPES = (
    "VIEW_3D",
    "IMAGE_EDITOR",
    "NODE_EDITOR",
    "SEQUENCE_EDITOR",
    "CLIP_EDITOR",
    "DOPESHEET_EDITOR",
    "GRAPH_EDITOR",
    "NLA_EDITOR",
    "TEXT_EDITOR",
    "CONSOLE",
    "INFO",
    "OUTLINER",
    "PROPERTIES",
    "FILE_BROWSER",
    "SPREADSHEET",
)


def require_window() -> Any:
    """The active window, or the structured error an agent can act on."""
    if bpy.app.background:
        raise ToolError(
            "This tool needs Blender's interface, and this Blender runs in the background (no window). "
            "Use it with an interactive Blender.",
            state="no_interactive_session",
        )
    window = bpy.context.window or next(iter(bpy.context.window_manager.windows), None)
    if window is None:
        raise ToolError("Blender has no open window right now.", state="no_interactive_session")
    return window


def screenshot_window(arguments: dict[str, Any], job: JobContext) -> Image | Deferred:
    window = require_window()
    override = {"window": window, "screen": window.screen}
    size_limit = arguments.get("size_limit_in_bytes", 0)
    return _screenshot("screenshot", override, size_limit, lambda: _RegionCapture(window, None, size_limit))


def screenshot_area(arguments: dict[str, Any], job: JobContext) -> Image | Deferred:
    window = require_window()
    wanted = arguments["area_ui_type"]
    area = next((a for a in window.screen.areas if a.ui_type == wanted or a.type == wanted), None)
    if area is None:
        available = sorted({a.ui_type for a in window.screen.areas})
        raise ToolError(f"No {wanted} area on the current screen.", state="not_found", available_area_types=available)
    region = next(r for r in area.regions if r.type == "WINDOW")
    override = {"window": window, "screen": window.screen, "area": area, "region": region}
    size_limit = arguments.get("size_limit_in_bytes", 0)
    return _screenshot("screenshot_area", override, size_limit, lambda: _RegionCapture(window, area, size_limit))


def _screenshot(operator: str, override: dict[str, Any], size_limit: int, fallback: Any) -> Image | Deferred:
    """Blender's own screenshot; when it comes back one colour, the regions as they are drawn next (deferred)."""
    with tempfile.TemporaryDirectory(prefix="hermes-shot-") as folder:
        path = Path(folder) / "shot.png"
        with bpy.context.temp_override(**override):
            getattr(bpy.ops.screen, operator)(filepath=str(path), check_existing=False)
        if _uniform_png(path):
            return Deferred(fallback().poll)
        return fitted(path, size_limit)


def _uniform_png(path: Path) -> bool:
    return _uniform(pixels_of(path)[1].tobytes(), 16)


def _uniform(data: bytes, pixel: int) -> bool:
    return not data or data == data[:pixel] * (len(data) // pixel)


CAPTURE_WAIT = 3.0
"""Seconds the interface gets to draw every region once; a region still not drawn then is left out."""
_BACKGROUND = bytes((48, 48, 48, 255))
"""Where no region was read (the top bar and status bar have no draw handlers): Blender's own dark grey."""


class _RegionCapture:
    """Each region of an area (or of every area) read from the framebuffer it is drawn into, at its next draw."""

    def __init__(self, window: Any, area: Any, size_limit: int) -> None:
        self._size_limit = size_limit
        self._origin = (area.x, area.y) if area is not None else (0, 0)
        self._size = (area.width, area.height) if area is not None else (window.width, window.height)
        areas = [area] if area is not None else list(window.screen.areas)
        self._regions = {
            region.as_pointer(): (_overlaps(a, region), region.x, region.y, region.width, region.height)
            for a in areas
            for region in a.regions
            if region.width > 1 and region.height > 1
        }
        self._pixels: dict[int, bytes] = {
            region.as_pointer(): _view3d_pixels(window, a, region)
            for a in areas
            if a.type == "VIEW_3D"
            for region in a.regions
            if region.type == "WINDOW" and region.as_pointer() in self._regions
        }
        """The 3D Viewport's main region is drawn offscreen at once: its draw handlers see only the overlays."""
        self._handles: list[tuple[Any, Any, str]] = []
        for space, region_type in {(type(a.spaces.active), r.type) for a in areas for r in a.regions}:
            try:
                handle = space.draw_handler_add(self._read, (), region_type, "POST_PIXEL")
            except (TypeError, ValueError, AttributeError):  # a space or region kind without draw handlers
                continue
            self._handles.append((space, handle, region_type))
        for a in areas:
            a.tag_redraw()
        self._deadline = time.monotonic() + CAPTURE_WAIT

    def _read(self) -> None:
        import gpu  # in the draw callback only: background Blender never gets here

        region = bpy.context.region
        key = region.as_pointer() if region is not None else None
        if key not in self._regions or key in self._pixels:
            return
        _, _, _, width, height = self._regions[key]
        buffer = gpu.state.active_framebuffer_get().read_color(0, 0, width, height, 4, 0, "UBYTE")
        self._pixels[key] = bytes(memoryview(buffer).cast("B"))

    def poll(self) -> Image | None:
        if len(self._pixels) < len(self._regions) and time.monotonic() < self._deadline:
            return None
        for space, handle, region_type in self._handles:
            space.draw_handler_remove(handle, region_type)
        width, height = self._size
        canvas = bytearray(_BACKGROUND * (width * height))
        for key in sorted(self._pixels, key=lambda key: self._regions[key][0]):  # panels over the view last
            overlaps, x, y, w, h = self._regions[key]
            _paste(canvas, width, height, self._pixels[key], (x - self._origin[0], y - self._origin[1], w, h), overlaps)
        if _uniform(bytes(canvas), 4):
            raise ToolError(
                "Blender gave back a picture of one colour for this screenshot, and its regions could not be read "
                "either: its GPU driver does not let the window's pixels be read back (e.g. OpenGL on a virtual "
                "machine). Start Blender with `--gpu-backend vulkan`, or use the render tools to see the scene.",
                state="screenshot_unavailable",
            )
        with tempfile.TemporaryDirectory(prefix="hermes-shot-") as folder:
            path = Path(folder) / "shot.png"
            path.write_bytes(png_bytes(width, height, bytes(canvas)))
            return fitted(path, self._size_limit)


def _view3d_pixels(window: Any, area: Any, region: Any) -> bytes:
    """The 3D Viewport as it is shown (scene and overlays), drawn offscreen with the view's own matrices."""
    import gpu

    space = area.spaces.active
    view = space.region_3d
    offscreen = gpu.types.GPUOffScreen(region.width, region.height)
    try:
        offscreen.draw_view3d(
            window.scene,
            window.view_layer,
            space,
            region,
            view.view_matrix,
            view.window_matrix,
            do_color_management=True,
        )
        buffer = offscreen.texture_color.read()  # an 8-bit texture reads back as bytes
        buffer.dimensions = region.width * region.height * 4
        view_bytes = memoryview(buffer)
        if view_bytes.format in ("f", "d"):  # a float texture (not the default): scaled to bytes
            return bytes(min(255, int(v * 255 + 0.5)) for v in buffer)
        return bytes(view_bytes.cast("B"))
    finally:
        offscreen.free()


def _overlaps(area: Any, region: Any) -> bool:
    """A panel drawn over its area's main region (the sidebar and toolbar with region overlap): transparent where
    it draws nothing."""
    main = next((r for r in area.regions if r.type == "WINDOW"), None)
    if main is None or region.type == "WINDOW":
        return False
    inside_x = main.x <= region.x and region.x + region.width <= main.x + main.width
    return inside_x and main.y <= region.y and region.y + region.height <= main.y + main.height


def _paste(
    canvas: bytearray, width: int, height: int, pixels: bytes, box: tuple[int, int, int, int], over: bool
) -> None:
    """A region's rows (bottom-up RGBA) into the canvas at `box` (x, y, w, h): opaque, or where it draws (`over`)."""
    x, y, w, h = box
    left, right = max(0, x), min(width, x + w)
    for row in range(h):
        top = y + row
        if not 0 <= top < height or left >= right:
            continue
        source = pixels[(row * w + left - x) * 4 : (row * w + right - x) * 4]
        start = (top * width + left) * 4
        if not over:
            canvas[start : start + len(source)] = source
            canvas[start + 3 : start + len(source) : 4] = b"\xff" * (right - left)
            continue
        for i in range(0, len(source), 4):
            if source[i + 3]:
                canvas[start + i : start + i + 3] = source[i : i + 3]


def window_as_json(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    window = require_window()
    view_layer = window.view_layer
    active = view_layer.objects.active
    return {
        "status": "ok",
        "window_width": window.width,
        "window_height": window.height,
        "screen_name": window.screen.name,
        "workspace": window.workspace.name,
        "scene": window.scene.name,
        "areas": [
            {"type": a.type, "ui_type": a.ui_type, "x": a.x, "y": a.y, "width": a.width, "height": a.height}
            for a in window.screen.areas
        ],
        "active_object": active.name if active is not None else None,
        "selected_objects": sorted(o.name for o in view_layer.objects if o.select_get(view_layer=view_layer)),
    }


def jump_to_tab(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    window = require_window()
    workspace = bpy.data.workspaces.get(arguments["name"])
    if workspace is None:
        raise ToolError(
            f"No workspace named {arguments['name']!r}.",
            state="not_found",
            available_workspaces=sorted(ws.name for ws in bpy.data.workspaces),
        )
    window.workspace = workspace
    return {"status": "ok", "workspace": workspace.name}


def jump_to_space(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    window = require_window()
    space_type = arguments["space_type"]
    for workspace in [window.workspace, *sorted(bpy.data.workspaces, key=lambda ws: ws.name)]:
        if any(area.type == space_type for screen in workspace.screens for area in screen.areas):
            window.workspace = workspace
            return {"status": "ok", "workspace": workspace.name, "space_type": space_type, "created": False}
    if not arguments.get("allow_edits", False):
        present = sorted({area.type for ws in bpy.data.workspaces for screen in ws.screens for area in screen.areas})
        raise ToolError(
            f"No workspace shows a {space_type} area; pass allow_edits to turn the largest area into one.",
            state="not_found",
            available_space_types=present,
        )
    largest = max(window.screen.areas, key=lambda area: area.width * area.height)
    largest.type = space_type
    return {"status": "ok", "workspace": window.workspace.name, "space_type": space_type, "created": True}


def jump_to_object(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    obj = bpy.data.objects.get(arguments["name"])
    if obj is None:
        raise ToolError(f"No object named {arguments['name']!r}.", state="not_found")
    return _frame(obj, edit_mode=False, allow_edits=arguments.get("allow_edits", False))


def jump_to_object_data(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    obj = next((o for o in bpy.data.objects if o.data is not None and o.data.name == arguments["name"]), None)
    if obj is None:
        raise ToolError(f"No object uses data named {arguments['name']!r}.", state="not_found")
    return {**_frame(obj, edit_mode=True, allow_edits=arguments.get("allow_edits", False)), "data_name": obj.data.name}


def _frame(obj: Any, *, edit_mode: bool, allow_edits: bool) -> dict[str, Any]:
    """Center a 3D view on the object; with allow_edits also select it (and enter edit mode for data)."""
    window = require_window()
    area = next((a for a in window.screen.areas if a.type == "VIEW_3D"), None)
    if area is None:
        raise ToolError("The current screen has no 3D Viewport.", state="not_found")
    view = area.spaces.active.region_3d
    view.view_location = obj.matrix_world.translation
    view.view_distance = max(max(obj.dimensions) * 2.5, 1.0)
    if allow_edits:
        view_layer = window.view_layer
        if bpy.context.mode != "OBJECT":
            bpy.ops.object.mode_set(mode="OBJECT")
        for other in view_layer.objects:
            other.select_set(False)
        obj.select_set(True)
        view_layer.objects.active = obj
        if edit_mode and obj.type in ("MESH", "CURVE", "SURFACE", "META", "FONT", "ARMATURE", "LATTICE"):
            bpy.ops.object.mode_set(mode="EDIT")
    return {"status": "ok", "object": obj.name, "type": obj.type, "location": list(obj.matrix_world.translation)}


_NAME = {"type": "string", "minLength": 1, "maxLength": 1024}
_EDITS = {"type": "boolean", "default": False, "description": "Also change selection, mode or layout to get there."}

_FRAMED = shallow(status="string", object="string", type="string", location="array")

SCREEN_TOOLS = (
    Tool(
        "get_screenshot_of_window_as_image",
        "Screenshot of the window",
        "A PNG of Blender's whole window (interactive Blender only).",
        screenshot_window,
        input_schema=arguments(size_limit_in_bytes={**SIZE_LIMIT, "default": 0}),
    ),
    Tool(
        "get_screenshot_of_area_as_image",
        "Screenshot of one area",
        "A PNG of one area of the current screen, chosen by its ui_type (e.g. VIEW_3D, ShaderNodeTree).",
        screenshot_area,
        input_schema=arguments(
            area_ui_type={"type": "string", "minLength": 1, "maxLength": 64},
            size_limit_in_bytes={**SIZE_LIMIT, "default": 0},
        ),
    ),
    Tool(
        "get_screenshot_of_window_as_json",
        "The window's layout",
        "The window's size, screen, workspace, scene, areas and selection, as JSON (interactive Blender only).",
        window_as_json,
        input_schema=dict(NO_ARGUMENTS),
        output_schema=shallow(
            status="string",
            window_width="integer",
            window_height="integer",
            screen_name="string",
            workspace="string",
            scene="string",
            areas="array",
            active_object=["string", "null"],
            selected_objects="array",
        ),
    ),
    Tool(
        "jump_to_tab_by_name",
        "Switch workspace",
        "Switch to the workspace (tab) with this name.",
        jump_to_tab,
        input_schema=arguments(name=_NAME),
        output_schema=shallow(status="string", workspace="string"),
        annotations=dict(MUTATING),
    ),
    Tool(
        "jump_to_tab_by_space_type",
        "Show an editor",
        "Switch to a workspace showing this editor type.",
        jump_to_space,
        input_schema=arguments(space_type={"type": "string", "enum": list(SPACE_TYPES)}, allow_edits=_EDITS),
        output_schema=shallow(status="string", workspace="string", space_type="string", created="boolean"),
        annotations=dict(MUTATING),
    ),
    Tool(
        "jump_to_view3d_object_by_name",
        "Look at an object",
        "Center the 3D Viewport on an object.",
        jump_to_object,
        input_schema=arguments(name=_NAME, allow_edits=_EDITS),
        output_schema=_FRAMED,
        annotations=dict(MUTATING),
    ),
    Tool(
        "jump_to_view3d_object_data_by_name",
        "Look at object data",
        "Center the 3D Viewport on the object using this data (mesh, curve, ...); with allow_edits, enter Edit Mode.",
        jump_to_object_data,
        input_schema=arguments(name=_NAME, allow_edits=_EDITS),
        output_schema={**_FRAMED, "properties": {**_FRAMED["properties"], "data_name": {"type": "string"}}},
        annotations=dict(MUTATING),
    ),
)
