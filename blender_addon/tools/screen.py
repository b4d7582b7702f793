"""Tools that need Blender's window: screenshots and jumps. In background mode they say so."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import bpy

from ..errors import ToolError
from .base import MUTATING, NO_ARGUMENTS, Image, Tool, arguments, shallow

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
_SIZE = {
    "type": "integer",
    "minimum": 0,
    "maximum": 50_000_000,
    "description": "Shrink the PNG below this many bytes (0: no limit).",
}
_SMALLEST_SIDE = 64


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


def screenshot_window(arguments: dict[str, Any]) -> Image:
    window = require_window()
    return _screenshot(
        "screenshot", {"window": window, "screen": window.screen}, arguments.get("size_limit_in_bytes", 0)
    )


def screenshot_area(arguments: dict[str, Any]) -> Image:
    window = require_window()
    wanted = arguments["area_ui_type"]
    area = next((a for a in window.screen.areas if a.ui_type == wanted or a.type == wanted), None)
    if area is None:
        available = sorted({a.ui_type for a in window.screen.areas})
        raise ToolError(f"No {wanted} area on the current screen.", state="not_found", available_area_types=available)
    region = next(r for r in area.regions if r.type == "WINDOW")
    override = {"window": window, "screen": window.screen, "area": area, "region": region}
    return _screenshot("screenshot_area", override, arguments.get("size_limit_in_bytes", 0))


def _screenshot(operator: str, override: dict[str, Any], size_limit: int) -> Image:
    with tempfile.TemporaryDirectory(prefix="hermes-shot-") as folder:
        path = Path(folder) / "shot.png"
        with bpy.context.temp_override(**override):
            getattr(bpy.ops.screen, operator)(filepath=str(path), check_existing=False)
        image = bpy.data.images.load(str(path))
        try:
            width, height = image.size
            png = path.read_bytes()
            while size_limit and len(png) > size_limit:
                width, height = width // 2, height // 2
                if min(width, height) < _SMALLEST_SIDE:
                    raise ToolError(
                        f"The screenshot cannot be made smaller than {size_limit} bytes.", state="too_large"
                    )
                image.scale(width, height)
                image.filepath_raw = str(path)
                image.file_format = "PNG"
                image.save()
                png = path.read_bytes()
        finally:
            bpy.data.images.remove(image)
    return Image(png, {"width": width, "height": height, "bytes": len(png)})


def window_as_json(arguments: dict[str, Any]) -> dict[str, Any]:
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


def jump_to_tab(arguments: dict[str, Any]) -> dict[str, Any]:
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


def jump_to_space(arguments: dict[str, Any]) -> dict[str, Any]:
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


def jump_to_object(arguments: dict[str, Any]) -> dict[str, Any]:
    obj = bpy.data.objects.get(arguments["name"])
    if obj is None:
        raise ToolError(f"No object named {arguments['name']!r}.", state="not_found")
    return _frame(obj, edit_mode=False, allow_edits=arguments.get("allow_edits", False))


def jump_to_object_data(arguments: dict[str, Any]) -> dict[str, Any]:
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
        input_schema=arguments(size_limit_in_bytes={**_SIZE, "default": 0}),
    ),
    Tool(
        "get_screenshot_of_area_as_image",
        "Screenshot of one area",
        "A PNG of one area of the current screen, chosen by its ui_type (e.g. VIEW_3D, ShaderNodeTree).",
        screenshot_area,
        input_schema=arguments(
            area_ui_type={"type": "string", "minLength": 1, "maxLength": 64},
            size_limit_in_bytes={**_SIZE, "default": 0},
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
