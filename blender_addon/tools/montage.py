"""get_view_montage: one PNG of several labelled views of a target, rendered offscreen, leaving no trace.

Each view is an orthographic camera framed on the target's bounds (read in C, `foreach_get` of `bound_box` and
`matrix_world`), rendered by Workbench (or the scene's engine on request) in a background Blender and in the GUI
alike, labelled with Blender's own stamp, and laid in a grid. Everything it sets is put back: the camera it made
(object and data) is removed, the scene's camera, render and display settings restored, and its depsgraph updates
are nobody's change (the scene's revision stays). No undo step is pushed.
"""

from __future__ import annotations

import math
import tempfile
from array import array
from pathlib import Path
from typing import Any

import bpy
from mathutils import Matrix, Vector

from .. import scene_revision
from ..errors import ToolError
from .base import READ_ONLY, Image, Tool, arguments
from .context import JobContext
from .pictures import SIZE_LIMIT, SMALLEST_SIDE, fitted, pixels_of
from .render import apply_settings, png_output, render_still, restore_settings

VIEWS = {
    "front": (0.0, 0.0),
    "back": (180.0, 0.0),
    "right": (90.0, 0.0),
    "left": (-90.0, 0.0),
    "top": (0.0, 90.0),
    "bottom": (0.0, -90.0),
    "three_quarter": (45.0, 35.0),
}
"""Azimuth (degrees around Z from the front, -Y, toward +X) and elevation, as Blender's numpad views see them."""
DEFAULT_VIEWS = ["front", "right", "top", "three_quarter"]
DRAWN = {"MESH", "CURVE", "SURFACE", "META", "FONT", "CURVES", "POINTCLOUD", "VOLUME", "GREASEPENCIL"}
"""Object types a render draws: the default target frames these (lights and cameras would only widen the frame)."""
MAX_VIEWS = 9
MIN_RADIUS = 0.01
MAX_EXTENT = 1e9
"""Bounds wider than this (metres) cannot be rendered usefully: an infinite scale reads as 3.4e38."""
"""Half the extent below which a target is framed as this small (a point: an empty, a single vertex)."""

CUSTOM_VIEW = {
    "type": "object",
    "properties": {
        "azimuth": {
            "type": "number",
            "minimum": -360,
            "maximum": 360,
            "description": "Degrees around Z from the front.",
        },
        "elevation": {"type": "number", "minimum": -90, "maximum": 90, "description": "Degrees above the horizon."},
        "label": {"type": "string", "maxLength": 40},
    },
    "required": ["azimuth", "elevation"],
    "additionalProperties": False,
}
MONTAGE_SCHEMA = arguments(
    objects={
        "type": "array",
        "items": {"type": "string", "minLength": 1, "maxLength": 1024},
        "maxItems": 1000,
        "default": [],
        "description": "Frame these objects (by name). Default: every visible object of the scene.",
    },
    collection={
        "type": "string",
        "minLength": 1,
        "maxLength": 1024,
        "default": "",
        "description": "Frame this collection's objects (and its children's) instead.",
    },
    views={
        "type": "array",
        "items": {"type": "string", "enum": list(VIEWS)},
        "maxItems": MAX_VIEWS,
        "default": DEFAULT_VIEWS,
        "description": "Named views, laid out in this order.",
    },
    custom_views={
        "type": "array",
        "items": CUSTOM_VIEW,
        "maxItems": MAX_VIEWS,
        "default": [],
        "description": "More views by azimuth and elevation (degrees), after the named ones.",
    },
    tile_size={"type": "integer", "minimum": SMALLEST_SIDE, "maximum": 1024, "default": 256},
    engine={
        "type": "string",
        "enum": ["WORKBENCH", "SCENE"],
        "default": "WORKBENCH",
        "description": "WORKBENCH (quick, solid colours from materials) or SCENE (the scene's own engine: slower).",
    },
    size_limit_in_bytes={**SIZE_LIMIT, "default": 0},
)


def montage(arguments: dict[str, Any], job: JobContext, also: tuple[Vector, Vector] | None = None) -> Image:
    """The montage `arguments` ask for; `also`: bounds the frame must hold besides the target's (the after picture
    of a pair holds where things were before)."""
    scene = bpy.context.scene
    views = [_view(view) for view in [*arguments.get("views", DEFAULT_VIEWS), *arguments.get("custom_views", [])]]
    if not views or len(views) > MAX_VIEWS:
        raise ToolError(f"ask for 1 to {MAX_VIEWS} views in all (got {len(views)})", state="invalid_arguments")
    targets = _targets(arguments, scene)
    size = arguments.get("tile_size", 256)
    columns = math.ceil(math.sqrt(len(views)))
    rows = math.ceil(len(views) / columns)
    with job.changes.unrecorded(), tempfile.TemporaryDirectory(prefix="hermes-montage-") as folder:
        low, high = _bounds(targets)  # `unrecorded` evaluated the depsgraph: world matrices are current
        if also is not None:
            low = Vector(map(min, low, also[0]))
            high = Vector(map(max, high, also[1]))
        tiles = _render(scene, views, low, high, size, arguments.get("engine", "WORKBENCH"), Path(folder), job)
        sheet = Path(folder) / "montage.png"
        _save_sheet(tiles, columns, rows, size, sheet)
        picture = fitted(sheet, arguments.get("size_limit_in_bytes", 0))
    shrunk = picture.details["width"] / (columns * size)
    return Image(
        picture.png,
        {
            "views": [label for label, _, _ in views],
            "columns": columns,
            "rows": rows,
            "tile_size": round(size * shrunk),
            **picture.details,
            "objects": len(targets),
            "bounds": {"min": [round(v, 4) for v in low], "max": [round(v, 4) for v in high]},
            "revision": scene_revision.current(),
            "left_no_trace": True,
        },
    )


def _targets(arguments: dict[str, Any], scene: Any) -> list[Any]:
    view_layer = bpy.context.view_layer
    names = arguments.get("objects", [])
    if names:
        found = [scene.objects.get(name) for name in names]
        missing = [name for name, obj in zip(names, found, strict=True) if obj is None]
        if missing:
            raise ToolError(
                f"no object named {', '.join(repr(n) for n in missing[:5])} in scene {scene.name!r}",
                state="not_found",
                missing=missing[:20],
            )
        return [obj for obj in found if obj is not None]
    if collection_name := arguments.get("collection"):
        collection = bpy.data.collections.get(collection_name)
        if collection is None:
            raise ToolError(f"no collection named {collection_name!r}", state="not_found")
        candidates = list(collection.all_objects)
    else:
        candidates = list(scene.objects)
    objects = [obj for obj in candidates if obj.type in DRAWN and obj.visible_get(view_layer=view_layer)]
    if not objects:
        where = f"collection {collection_name!r}" if collection_name else f"scene {scene.name!r}"
        raise ToolError(
            f"nothing to look at: the {where} has no visible geometry in this view layer (lights and cameras draw "
            "nothing; hidden, excluded or unlinked objects are not rendered)",
            state="empty_target",
        )
    return objects


def _bounds(objects: list[Any]) -> tuple[Vector, Vector]:
    """The target's world-space bounds: each object's own box corners moved by its world matrix (Blender keeps the
    box of the evaluated geometry); an object with no geometry counts as its origin."""
    low = [math.inf] * 3
    high = [-math.inf] * 3
    for obj in objects:
        matrix = obj.matrix_world
        box = [tuple(corner) for corner in obj.bound_box]
        points = [matrix.translation] if not any(any(corner) for corner in box) else [matrix @ Vector(c) for c in box]
        for point in points:
            if all(math.isfinite(value) for value in point):
                for axis in range(3):
                    low[axis] = min(low[axis], point[axis])
                    high[axis] = max(high[axis], point[axis])
    if not math.isfinite(low[0]) or max(high[axis] - low[axis] for axis in range(3)) > MAX_EXTENT:
        raise ToolError(
            f"the target's bounds are not finite or wider than {MAX_EXTENT:g} (an infinite scale?): nothing can frame "
            "them; name the objects to look at",
            state="empty_target",
        )
    return Vector(low), Vector(high)


def _view(view: str | dict[str, Any]) -> tuple[str, float, float]:
    if isinstance(view, str):
        azimuth, elevation = VIEWS[view]
        return view.replace("_", "-"), azimuth, elevation
    azimuth, elevation = float(view["azimuth"]), float(view["elevation"])
    if not (math.isfinite(azimuth) and math.isfinite(elevation)):
        raise ToolError("a custom view's azimuth and elevation must be numbers of degrees", state="invalid_arguments")
    return view.get("label") or f"az {azimuth:g} el {elevation:g}", azimuth, elevation


def _camera_matrix(direction: Vector, position: Vector) -> Matrix:
    """A camera at `position` looking along -`direction`, Z up (or Y up when looking straight down or up), so the
    front view has +X to the right and the top view +Y up, as Blender's numpad views."""
    z_axis = direction.normalized()
    up = Vector((0.0, 0.0, 1.0)) if abs(z_axis.z) < 0.999 else Vector((0.0, math.copysign(1.0, z_axis.z), 0.0))
    x_axis = up.cross(z_axis).normalized()
    y_axis = z_axis.cross(x_axis)
    matrix = Matrix((x_axis, y_axis, z_axis)).transposed().to_4x4()
    matrix.translation = position
    return matrix


def _render(
    scene: Any,
    views: list[tuple[str, float, float]],
    low: Vector,
    high: Vector,
    size: int,
    engine: str,
    folder: Path,
    job: JobContext,
) -> list[array[float]]:
    """Each view rendered to a PNG and read back. Everything set is put back under a shield: a stop (a deadline, a
    client that left) is raised after the clean-up, never inside it."""
    center = (low + high) / 2
    radius = max((high - low).length / 2, MIN_RADIUS)
    render = scene.render
    saved: dict[str, Any] = {}
    markers: list[tuple[Any, Any]] = []
    data = camera = None
    tiles = []
    try:
        data = bpy.data.cameras.new("hermes-montage")
        camera = bpy.data.objects.new("hermes-montage", data)
        data.type = "ORTHO"
        data.ortho_scale = radius * 2.2
        data.clip_start = radius * 0.01
        data.clip_end = radius * 6
        scene.collection.objects.link(camera)
        markers = [(marker, marker.camera) for marker in scene.timeline_markers if marker.camera is not None]
        for marker, _ in markers:
            marker.camera = None  # a marker's camera would take over the view at its frame
        apply_settings(scene, _settings(scene, camera, size, engine, folder), saved)
        for index, (label, azimuth, elevation) in enumerate(views):
            job.report(index / len(views), f"view {index + 1} of {len(views)}: {label}")
            a, e = math.radians(azimuth), math.radians(elevation)
            direction = Vector((math.sin(a) * math.cos(e), -math.cos(a) * math.cos(e), math.sin(e)))
            camera.matrix_world = _camera_matrix(direction, center + direction * radius * 3)
            path = folder / f"view-{index}.png"
            render.filepath = str(path)
            render.stamp_note_text = label
            job.interrupts.held(render_still, say=job.report)
            tiles.append(_read(path, size))
    finally:
        with job.interrupts.shielded():
            restore_settings(scene, saved)
            for marker, marker_camera in markers:
                marker.camera = marker_camera
            if camera is not None:
                bpy.data.objects.remove(camera)
            if data is not None:
                bpy.data.cameras.remove(data)
    return tiles


def _settings(scene: Any, camera: Any, size: int, engine: str, folder: Path) -> dict[str, Any]:
    """What a montage's renders set: a square PNG of the camera's view alone, as the 3D scene looks (no video
    output, compositor, sequencer strips, border, stereo, odd pixel aspect or exposure), labelled by the stamp."""
    render = scene.render
    settings: dict[str, Any] = {
        "camera": camera,
        **png_output(scene),
        "render.image_settings.color_mode": "RGBA",
        "render.image_settings.color_depth": "8",
        "render.resolution_x": size,
        "render.resolution_y": size,
        "render.resolution_percentage": 100,
        "render.pixel_aspect_x": 1.0,
        "render.pixel_aspect_y": 1.0,
        "render.use_border": False,
        "render.use_multiview": False,
        "render.use_compositing": False,
        "render.use_sequencer": False,
        "render.use_file_extension": True,
        "render.film_transparent": False,
        "view_settings.view_transform": "Standard",
        "view_settings.look": "None",
        "view_settings.exposure": 0.0,
        "view_settings.gamma": 1.0,
        "view_settings.use_curve_mapping": False,
        "render.use_stamp": True,
        "render.filepath": str(folder / "view.png"),
        "render.stamp_note_text": "",
        "render.use_stamp_note": True,
        "render.stamp_font_size": max(12, size // 16),
        **{f"render.{name}": False for name in _stamp_fields(render) if name != "use_stamp_note"},
    }
    if engine == "WORKBENCH":
        settings["render.engine"] = "BLENDER_WORKBENCH"
        settings["display.shading.color_type"] = "MATERIAL"
        settings["display.shading.light"] = "STUDIO"
    return settings


def _stamp_fields(render: Any) -> list[str]:
    return [prop.identifier for prop in render.bl_rna.properties if prop.identifier.startswith("use_stamp_")]


def _read(path: Path, size: int) -> array[float]:
    (width, height), pixels = pixels_of(path)
    if (width, height) != (size, size):
        raise ToolError(f"Blender rendered {width}x{height}, not {size}x{size}", state="tool_failed")
    return pixels


def _save_sheet(tiles: list[array[float]], columns: int, rows: int, size: int, path: Path) -> None:
    """The tiles in a grid, first at the top left, as a PNG Blender writes (RGBA floats, bottom row first, as
    Blender reads and writes them; rows are copied as slices, in C)."""
    width, height = columns * size, rows * size
    sheet = array("f", (0.0, 0.0, 0.0, 1.0)) * (width * height)
    stride = size * 4
    for index, tile in enumerate(tiles):
        row, column = divmod(index, columns)
        bottom = (rows - 1 - row) * size
        for y in range(size):
            start = ((bottom + y) * width + column * size) * 4
            sheet[start : start + stride] = tile[y * stride : (y + 1) * stride]
    image = bpy.data.images.new("hermes-montage", width, height, alpha=True)
    try:
        image.pixels.foreach_set(sheet)
        image.filepath_raw = str(path)
        image.file_format = "PNG"
        image.save()
    finally:
        bpy.data.images.remove(image)


VIEW_MONTAGE = Tool(
    name="get_view_montage",
    title="Look at the scene from several views",
    description=(
        "One PNG of several labelled views (default: front, right, top and three-quarter) of the scene's visible "
        "geometry (lights and cameras left out of the frame), named `objects` or a `collection`, each framed on the "
        "target's bounds and rendered offscreen (Workbench by default), in a background Blender and in the GUI "
        "alike. Leaves no trace: nothing added to the file, no undo step, settings as they were (`revision` "
        "unchanged). Look after a change; compare."
    ),
    run=montage,
    input_schema=MONTAGE_SCHEMA,
    annotations=dict(READ_ONLY),
)
