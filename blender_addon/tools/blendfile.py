"""Summaries of the open .blend file: what it holds, what it misses, where it lives, what it is for."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bpy

from ..budget import BUDGET, budgeted
from .base import NO_ARGUMENTS, Tool, arguments, shallow
from .context import JobContext

DEFAULT_LIMIT = 500
LIMIT_SCHEMA = arguments(
    limit={
        "type": "integer",
        "minimum": 1,
        "maximum": 5000,
        "default": DEFAULT_LIMIT,
        "description": f"At most this many list entries. Without it, lists stop at about {BUDGET} characters in "
        "all (cut_at_budget says so; the counts are whole).",
    }
)
COUNTED = (
    "objects",
    "meshes",
    "curves",
    "materials",
    "textures",
    "images",
    "node_groups",
    "collections",
    "cameras",
    "lights",
    "actions",
    "armatures",
    "grease_pencils",
    "scenes",
    "worlds",
    "libraries",
    "fonts",
    "sounds",
    "movieclips",
    "volumes",
    "workspaces",
    "texts",
    "particles",
    "brushes",
    "lattices",
    "metaballs",
    "speakers",
    "lightprobes",
    "cache_files",
)
_FILE_BACKED = ("images", "libraries", "sounds", "movieclips", "fonts", "volumes", "cache_files")


def _limited(arguments: dict[str, Any], **lists: list[Any]) -> tuple[dict[str, list[Any]], dict[str, bool]]:
    """Each list up to the limit, and within the budget when the caller named no limit."""
    limit = arguments.get("limit", DEFAULT_LIMIT)
    return budgeted({key: entries[:limit] for key, entries in lists.items()}, sized="limit" in arguments)


def datablocks(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    data = bpy.data
    scene = bpy.context.scene
    workspaces = sorted(ws.name for ws in data.workspaces)
    lists, cut = _limited(arguments, workspaces=workspaces)
    window = bpy.context.window
    return {
        "status": "ok",
        "datablock_counts": {name: len(getattr(data, name)) for name in COUNTED if hasattr(data, name)},
        "render_engine": scene.render.engine,
        "scene_name": scene.name,
        "workspaces": lists["workspaces"],
        "workspace_count": len(workspaces),
        "active_workspace": window.workspace.name if window is not None else None,
        **cut,
    }


def external_files() -> Iterator[tuple[str, Any, str, str]]:
    """Each file on disk the open .blend reads: (kind, datablock, its path as written, the absolute path). Packed,
    generated and viewer data read none; a UDIM image reads one file per tile."""
    for kind in _FILE_BACKED:
        for block in getattr(bpy.data, kind, ()):
            path = getattr(block, "filepath", "")
            if (
                not path
                or getattr(block, "packed_file", None) is not None
                or getattr(block, "source", "FILE") in ("GENERATED", "VIEWER")
            ):
                continue
            absolute = bpy.path.abspath(path, library=block.library)
            if getattr(block, "source", "FILE") == "TILED" and "<UDIM>" in absolute:
                for tile in block.tiles:
                    yield kind, block, path, absolute.replace("<UDIM>", str(tile.number))
            else:
                yield kind, block, path, absolute


def missing_files(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    missing: list[dict[str, Any]] = []
    checked = 0
    for kind, block, path, absolute in external_files():
        checked += 1
        if not os.path.exists(absolute):
            missing.append({"type": kind, "name": block.name, "filepath": path, "absolute_path": absolute})
    lists, cut = _limited(arguments, missing_files=missing)
    return {"status": "ok", **lists, "missing_count": len(missing), "total_checked": checked, **cut}


def linked_libraries(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    def entry(library: Any) -> dict[str, Any]:
        absolute = bpy.path.abspath(library.filepath)
        return {
            "name": library.name,
            "filepath": library.filepath,
            "exists": os.path.exists(absolute),
            "parent": library.parent.name if library.parent is not None else None,
        }

    libraries = list(bpy.data.libraries)
    direct = [entry(lib) for lib in libraries if lib.parent is None]
    indirect = [entry(lib) for lib in libraries if lib.parent is not None]
    lists, cut = _limited(arguments, direct_libraries=direct, indirect_libraries=indirect)
    return {"status": "ok", **lists, "total_library_count": len(libraries), **cut}


def path_info(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    filepath = bpy.data.filepath
    saved = bool(filepath)
    stat = Path(filepath).stat() if saved and os.path.exists(filepath) else None
    backups = [f"{filepath}{n}" for n in range(1, 33) if saved and os.path.exists(f"{filepath}{n}")]
    return {
        "status": "ok",
        "filepath": filepath or None,
        "is_saved": saved,
        "is_dirty": bpy.data.is_dirty,
        "age_seconds": round(time.time() - stat.st_mtime, 1) if stat is not None else None,
        "file_size_bytes": stat.st_size if stat is not None else None,
        "backups": backups,
    }


def usage_guess(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    """Scores from what the file holds; each guess says how sure it is."""
    data = bpy.data
    scene = bpy.context.scene
    meshes = [m for m in data.meshes if m.users]
    geometry_nodes = sum(1 for g in data.node_groups if g.bl_idname == "GeometryNodeTree")
    sequencer = scene.sequence_editor
    strips = len(sequencer.strips_all) if sequencer is not None and hasattr(sequencer, "strips_all") else 0
    signals = {
        "modeling": (len(meshes), 3),
        "animation": (
            len(data.actions) + sum(1 for o in data.objects if o.animation_data and o.animation_data.action),
            2,
        ),
        "rigging": (len(data.armatures), 1),
        "geometry_nodes": (geometry_nodes, 1),
        "grease_pencil": (len(data.grease_pencils) if hasattr(data, "grease_pencils") else 0, 1),
        "video_editing": (strips, 2),
        "simulation": (
            sum(
                1
                for o in data.objects
                for m in o.modifiers
                if m.type in ("FLUID", "CLOTH", "SOFT_BODY", "DYNAMIC_PAINT", "PARTICLE_SYSTEM")
            ),
            1,
        ),
        "rendering": (len(data.materials) + len(data.lights) + (1 if scene.camera else 0), 4),
    }
    guesses = {}
    for usage, (evidence, saturation) in signals.items():
        score = round(min(evidence / saturation, 1.0), 2)
        certainty = "high" if evidence >= 3 * saturation else "medium" if evidence >= saturation else "low"
        guesses[usage] = {"score": score, "certainty": certainty, "evidence": evidence}
    return {"status": "ok", "usage_guesses": guesses}


def _tool(name: str, title: str, description: str, run: Any, output: dict[str, Any], *, limit: bool = True) -> Tool:
    return Tool(
        name=name,
        title=title,
        description=description,
        run=run,
        input_schema=dict(LIMIT_SCHEMA if limit else NO_ARGUMENTS),
        output_schema=output,
    )


BLENDFILE_TOOLS = (
    _tool(
        "get_blendfile_summary_datablocks",
        "Datablocks in the file",
        "How many of each datablock the open .blend holds (objects, meshes, materials, images, node groups, ...), "
        "the render engine, the scene and the workspaces.",
        datablocks,
        shallow(
            status="string",
            datablock_counts="object",
            render_engine="string",
            scene_name="string",
            workspaces="array",
            workspace_count="integer",
            active_workspace=["string", "null"],
        ),
    ),
    _tool(
        "get_blendfile_summary_missing_files",
        "Missing external files",
        "External files the open .blend refers to (images, libraries, sounds, movie clips, fonts, volumes, caches) "
        "that are not on disk; packed and generated data are skipped.",
        missing_files,
        shallow(status="string", missing_files="array", missing_count="integer", total_checked="integer"),
    ),
    _tool(
        "get_blendfile_summary_of_linked_libraries",
        "Linked libraries",
        "Libraries the open .blend links from, direct and indirect, and whether each file exists.",
        linked_libraries,
        shallow(status="string", direct_libraries="array", indirect_libraries="array", total_library_count="integer"),
    ),
    _tool(
        "get_blendfile_summary_path_info",
        "Where the file lives",
        "The open .blend's path, whether it is saved and has unsaved changes, its age and size, and its backups.",
        path_info,
        shallow(
            status="string",
            filepath=["string", "null"],
            is_saved="boolean",
            is_dirty="boolean",
            age_seconds=["number", "null"],
            file_size_bytes=["integer", "null"],
            backups="array",
        ),
        limit=False,
    ),
    _tool(
        "get_blendfile_summary_usage_guess",
        "What the file is for",
        "Guesses what the open .blend is used for (modeling, animation, rigging, geometry nodes, grease pencil, video "
        "editing, simulation, rendering), each with a score, a certainty and the evidence count.",
        usage_guess,
        shallow(status="string", usage_guesses="object"),
        limit=False,
    ),
)
