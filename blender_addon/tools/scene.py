"""Scene overview tools: what is in the open file, by collection."""

from __future__ import annotations

from typing import Any

import bpy

from .base import Tool

_OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "type": {"type": "string"},
        "parent": {"type": ["string", "null"]},
        "data_name": {"type": ["string", "null"]},
        "selected": {"type": "boolean"},
        "visible": {"type": "boolean"},
        "hide_viewport": {"type": "boolean"},
        "instance_collection": {"type": "string"},
    },
    "required": ["name", "type", "parent", "data_name", "selected", "visible", "hide_viewport"],
}

_COLLECTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "exclude": {"type": "boolean"},
        "hide_viewport": {"type": "boolean"},
        "objects": {"type": "array", "items": _OBJECT_SCHEMA},
        "children": {"type": "array", "items": {"$ref": "#/$defs/collection"}},
    },
    "required": ["name", "exclude", "hide_viewport", "objects", "children"],
}

OBJECTS_SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {"collection": _COLLECTION_SCHEMA},
    "properties": {
        "status": {"type": "string", "const": "ok"},
        "scene_name": {"type": "string"},
        "active_workspace": {"type": ["string", "null"]},
        "active_object": {"type": ["string", "null"]},
        "object_mode": {"type": "string"},
        "camera_object": {"type": ["string", "null"]},
        "collections": {"type": "array", "items": {"$ref": "#/$defs/collection"}},
    },
    "required": [
        "status", "scene_name", "active_workspace", "active_object", "object_mode", "camera_object", "collections",
    ],
}


def objects_summary(arguments: dict[str, Any]) -> dict[str, Any]:
    context = bpy.context
    view_layer = context.view_layer
    scene = context.scene
    active = view_layer.objects.active
    workspace = context.workspace if context.window is not None else None
    return {
        "status": "ok",
        "scene_name": scene.name,
        "active_workspace": workspace.name if workspace is not None else None,
        "active_object": active.name if active is not None else None,
        "object_mode": context.mode,
        "camera_object": scene.camera.name if scene.camera is not None else None,
        "collections": [_layer_collection(view_layer.layer_collection, view_layer)],
    }


def _layer_collection(layer_collection: Any, view_layer: Any) -> dict[str, Any]:
    collection = layer_collection.collection
    return {
        "name": collection.name,
        "exclude": layer_collection.exclude,
        "hide_viewport": layer_collection.hide_viewport,
        "objects": [_object(obj, view_layer) for obj in sorted(collection.objects, key=_name)],
        "children": [_layer_collection(child, view_layer) for child in sorted(layer_collection.children, key=_name)],
    }


def _object(obj: Any, view_layer: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": obj.name,
        "type": obj.type,
        "parent": obj.parent.name if obj.parent is not None else None,
        "data_name": obj.data.name if obj.data is not None else None,
        "selected": obj.select_get(view_layer=view_layer),
        "visible": obj.visible_get(view_layer=view_layer),
        "hide_viewport": obj.hide_viewport,
    }
    if obj.instance_type == "COLLECTION" and obj.instance_collection is not None:
        entry["instance_collection"] = obj.instance_collection.name
    return entry


def _name(item: Any) -> str:
    return item.name


GET_OBJECTS_SUMMARY = Tool(
    name="get_objects_summary",
    title="Objects in the scene",
    description=(
        "List the objects of the current scene, grouped by collection (root 'Scene Collection'), with each "
        "object's type, parent, data, selection and visibility, plus the active object, mode and camera. "
        "Read this first to learn what the scene holds."
    ),
    run=objects_summary,
    output_schema=OBJECTS_SUMMARY_SCHEMA,
)
