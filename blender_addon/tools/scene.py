"""Scene overview tools: what is in the open file, by collection."""

from __future__ import annotations

import array
import fnmatch
import re
from collections.abc import Callable
from typing import Any

import bpy

from ..budget import BUDGET, budgeted, fitting
from ..errors import ToolError
from ..names import name_of
from . import scene_index
from .base import Tool, arguments, shallow
from .context import JobContext

DEFAULT_PAGE = 100
"""Objects in a page when the caller names no limit: with the counts first, an answer a model can take whole."""
MAX_PAGE = 5000
FIELDS = ("type", "parent", "data_name", "selected", "visible", "hide_viewport", "instance_collection")
"""Each object's fields, the official tool's names; `name` always comes."""
COLLECTIONS_LISTED = 50
"""Collections named in `counts.by_collection`; `counts.collections` says how many there are."""

PAGING_SCHEMA = arguments(
    offset={
        "type": "integer",
        "minimum": 0,
        "default": 0,
        "description": "Skip this many objects (of those the filters keep), in page order.",
    },
    limit={
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_PAGE,
        "default": DEFAULT_PAGE,
        "description": f"At most this many objects. Without it a page holds {DEFAULT_PAGE} and stops early at "
        f"about {BUDGET} characters.",
    },
    type={
        "type": "array",
        "items": {"type": "string", "enum": sorted(scene_index.TYPE_NAMES.values())},
        "maxItems": 32,
        "default": [],
        "description": 'Only objects of these types, e.g. ["MESH", "LIGHT"].',
    },
    collection={
        "type": "string",
        "minLength": 1,
        "maxLength": 1024,
        "default": "",
        "description": "Only objects in this collection and the collections inside it.",
    },
    name={
        "type": "string",
        "minLength": 1,
        "maxLength": 1024,
        "default": "*",
        "description": 'Only objects whose name matches this pattern (* and ?, case-insensitive), e.g. "Tree*".',
    },
    selected={"type": "boolean", "default": False, "description": "Only selected objects (when true)."},
    visible={"type": "boolean", "default": False, "description": "Only objects visible in the viewport (when true)."},
    fields={
        "type": "array",
        "items": {"type": "string", "enum": ["name", *FIELDS]},
        "maxItems": len(FIELDS) + 1,
        "default": list(FIELDS),
        "description": "Each object's fields besides its name, which always comes (naming it too is fine; default: "
        "all of them).",
    },
    revision={
        "type": "integer",
        "minimum": 0,
        "default": 0,
        "description": "The revision a previous page returned: the call fails with scene_changed if the scene "
        "changed since, instead of returning a page that does not fit the others.",
    },
)

OBJECTS_SUMMARY_SCHEMA: dict[str, Any] = {
    # One level deep on purpose: the official client checks every result against this schema, and the
    # recursive collection tree made that check cost 12x the call on a 1000-object page. The tree's shape
    # is documented in the description and held by the tests instead.
    **shallow(
        status="string",
        scene_name="string",
        active_workspace=["string", "null"],
        active_object=["string", "null"],
        object_mode=["string", "null"],
        camera_object=["string", "null"],
        counts="object",
        collections="array",
        total_objects="integer",
        offset="integer",
        limit="integer",
        next_offset=["integer", "null"],
        revision="integer",
    ),
}


def objects_summary(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    context = bpy.context
    view_layer = context.view_layer
    scene = context.scene
    active = view_layer.objects.active
    workspace = context.workspace if context.window is not None else None
    wanted = _Filter(arguments, view_layer)
    sized = "limit" in arguments
    page = _Page(arguments.get("offset", 0), arguments.get("limit", DEFAULT_PAGE), None if sized else BUDGET)
    index, (tree, matched) = scene_index.read_page(view_layer, lambda index: _read(index, wanted, page))
    given = arguments.get("revision", 0)
    if given and given != index.revision:
        raise ToolError(
            f"The scene changed since revision {given} (now {index.revision}): read the pages again from offset 0",
            state="scene_changed",
            revision=index.revision,
        )
    end = page.offset + len(page.entries)
    return {
        "status": "ok",
        "scene_name": name_of(scene),
        "active_workspace": name_of(workspace) if workspace is not None else None,
        "active_object": name_of(active) if active is not None else None,
        "object_mode": context.mode if active is not None else None,  # as the official tool: null without one
        "camera_object": name_of(scene.camera) if scene.camera is not None else None,
        "counts": _counts(index),
        "collections": [tree] if tree is not None else [],
        "total_objects": matched,
        "offset": page.offset,
        "limit": page.limit,
        "next_offset": end if matched > end else None,
        "revision": index.revision,
        **({"cut_at_budget": True} if page.cut else {}),
    }


def _counts(index: scene_index.Index) -> dict[str, Any]:
    named = [
        {"name": name_of(b.layer_collection.collection), "objects": b.count}
        for b in index.branches[:COLLECTIONS_LISTED]
    ]
    return {
        "total": index.total,
        "by_type": index.by_type,
        "by_collection": named,
        "collections": len(index.branches),
    }


class _Filter:
    """What the caller keeps; with no filter the whole scene is paged without looking at the other objects."""

    def __init__(self, arguments: dict[str, Any], view_layer: Any) -> None:
        self.view_layer = view_layer
        self.types = set(arguments.get("type", []))
        self.collection: str = arguments.get("collection", "")
        pattern = arguments.get("name", "*")
        self.pattern = None if pattern == "*" else re.compile(fnmatch.translate(pattern), re.IGNORECASE)
        self.selected: bool = arguments.get("selected", False)
        self.visible: bool = arguments.get("visible", False)
        self.fields_left_out = frozenset(FIELDS) - set(arguments.get("fields", FIELDS))

    @property
    def looks_at_objects(self) -> bool:
        return bool(self.types or self.pattern or self.selected or self.visible)

    def keeps(self, obj: Any) -> bool:
        if self.types and obj.type not in self.types:
            return False
        if self.pattern is not None and not self.pattern.match(name_of(obj)):
            return False
        if self.selected and not obj.select_get(view_layer=self.view_layer):
            return False
        return not (self.visible and not obj.visible_get(view_layer=self.view_layer))


class _Page:
    """The window [offset, offset+limit) over the objects kept, in page order, cut early at a character budget."""

    def __init__(self, offset: int, limit: int, budget: int | None) -> None:
        self.offset = offset
        self.limit = limit
        self.budget = budget
        self.entries: list[dict[str, Any]] = []
        self.cut = False

    def full(self) -> bool:
        return len(self.entries) >= self.limit

    def add(self, entry: dict[str, Any]) -> bool:
        """Keep the entry; False once the page is full (the budget is applied once it is: `fit`)."""
        self.entries.append(entry)
        return not self.full()

    def fit(self) -> None:
        """Cut the page where its entries pass the budget (`fitting`)."""
        if self.budget is None:
            return
        count, _ = fitting(self.entries, self.budget)
        if count < len(self.entries):
            del self.entries[count:]
            self.cut = True


def _read(index: scene_index.Index, wanted: _Filter, page: _Page) -> tuple[dict[str, Any] | None, int]:
    """The page's objects under their collections, and how many objects the filters keep in all."""
    page.entries, page.cut = [], False
    try:
        branches = scene_index.subtree(index, wanted.collection) if wanted.collection else index.branches
    except KeyError:
        raise ToolError(f"No collection named {wanted.collection!r} in this view layer", state="not_found") from None
    placed: dict[int, list[dict[str, Any]]] = {}
    if wanted.looks_at_objects:
        matched = 0
        for position, branch in enumerate(branches):
            for obj in branch.layer_collection.collection.objects:
                if not wanted.keeps(obj):
                    continue
                if matched >= page.offset and not page.full():
                    _place(page, placed, position, _object(obj, wanted))
                matched += 1
    else:
        base = branches[0].start
        matched = branches[0].end - base
        for position, branch in enumerate(branches):
            lo, hi = (
                max(page.offset + base, branch.start),
                min(page.offset + base + page.limit, branch.start + branch.count),
            )
            if lo >= hi or page.full():
                continue
            objects = scene_index.objects_in(branch, lo, hi)
            if len(objects) != hi - lo:
                raise scene_index.StaleIndex
            placed[position] = entries = [_object(obj, wanted) for obj in objects]  # within the limit by [lo, hi)
            page.entries += entries
    page.fit()
    if page.cut:
        kept = {id(entry) for entry in page.entries}
        placed = {position: [e for e in entries if id(e) in kept] for position, entries in placed.items()}
        placed = {position: entries for position, entries in placed.items() if entries}
    return _tree(branches, placed), matched


def _place(page: _Page, placed: dict[int, list[dict[str, Any]]], position: int, entry: dict[str, Any]) -> bool:
    """Add the entry to the page and under its collection; False once the page is full."""
    placed.setdefault(position, []).append(entry)
    return page.add(entry)


TREE_DEPTH = 40
"""Collections nested deeper than this are listed flat among the children of their ancestor at this depth, each
naming the collection it is `inside`: JSON readers refuse deep nesting (the official SDK's, pydantic's, at a few
hundred levels, where a user's tree of 1,200 nested collections failed the answer)."""


def _tree(branches: tuple[scene_index.Branch, ...], placed: dict[int, list[dict[str, Any]]]) -> dict[str, Any] | None:
    """The collections from the first branch down, each with this page's objects; a subtree with none on the
    page and no objects at all is kept (it tells the model the collection exists), others are left out."""
    if not branches:
        return None
    stack: list[tuple[int, dict[str, Any]]] = []
    root: dict[str, Any] | None = None
    occupied = _occupied(branches, placed)
    path: list[str] = []
    top = branches[0].depth  # a page of one collection's subtree starts below the scene's top
    for position, branch in enumerate(branches):
        depth = branch.depth - top
        while stack and stack[-1][0] >= depth:
            stack.pop()
        collection = branch.layer_collection.collection
        del path[depth:]
        path.append(name_of(collection))
        if position not in occupied:
            continue
        node = {
            "name": path[-1],
            "exclude": branch.layer_collection.exclude,
            "hide_viewport": collection.hide_viewport,  # the collection's own flag, as the official tool reads it
            "objects": placed.get(position, []),
            "children": [],
        }
        if depth > TREE_DEPTH:
            node["inside"] = path[-2]  # shown among the children of its ancestor at TREE_DEPTH
        if stack:
            stack[-1][1]["children"].append(node)
        else:
            root = node
        if depth <= TREE_DEPTH:
            stack.append((depth, node))
    return root


def _occupied(branches: tuple[scene_index.Branch, ...], placed: dict[int, list[dict[str, Any]]]) -> set[int]:
    """Branches shown: those with objects on the page or an empty subtree, and every ancestor of one."""
    shown: set[int] = set()
    path: list[int] = []
    for position, branch in enumerate(branches):
        while path and branches[path[-1]].depth >= branch.depth:
            path.pop()
        path.append(position)
        if position in placed or branch.end == branch.start:
            shown.update(path)
    shown.add(0)
    return shown


def _object(obj: Any, wanted: _Filter) -> dict[str, Any]:
    """One object's entry: every field read, in one literal (the fields asked are picked after: a subset is for the
    answer's size, and reading all costs less than deciding field by field)."""
    view_layer = wanted.view_layer
    name = name_of(obj)
    scene_index.remember(name, obj)
    parent, data, kind = obj.parent, obj.data, obj.type
    entry: dict[str, Any] = {
        "name": name,
        "type": kind,
        "parent": name_of(parent) if parent is not None else None,
        "data_name": name_of(data) if data is not None else None,
        "selected": obj.select_get(view_layer=view_layer),
        "visible": obj.visible_get(view_layer=view_layer),
        "hide_viewport": obj.hide_get(view_layer=view_layer),  # the eye icon, as the official tool reads it
    }
    if kind == "EMPTY" and (instanced := obj.instance_collection) is not None:  # the official tool: empties only
        entry["instance_collection"] = name_of(instanced)
    if wanted.fields_left_out:
        return {key: value for key, value in entry.items() if key not in wanted.fields_left_out}
    return entry


def _name(item: Any) -> str:
    return name_of(item)


GET_OBJECTS_SUMMARY = Tool(
    name="get_objects_summary",
    title="Objects in the scene",
    description=(
        "What the current scene holds: first the counts (total, by type, by collection), the active object, mode "
        "and camera; then a page of objects under their collections (root 'Scene Collection'), each with its "
        "type, parent, data, selection and visibility. Read this first. A page holds "
        f"{DEFAULT_PAGE} objects, fewer if they would pass about {BUDGET} characters: pass next_offset as offset "
        "(and revision, to learn if the scene changed meanwhile) to read on. In a big scene, ask for what you "
        "need instead of reading every page: filter by type, collection, name pattern, selected or visible, and "
        "pick fields. Filters look at every object in scope; the counts and unfiltered pages do not."
    ),
    run=objects_summary,
    input_schema=PAGING_SCHEMA,
    output_schema=OBJECTS_SUMMARY_SCHEMA,
)


DETAIL_CHILDREN = 200
"""Children named when the caller gives no limit (all are counted in children_total)."""
DETAIL_FIELDS = (
    "data_name",
    "location",
    "rotation",
    "scale",
    "dimensions",
    "parent",
    "children",
    "modifiers",
    "constraints",
    "materials",
    "visibility",
    "collections",
)
"""The detail's fields, the official tool's names (`children` brings `children_total`); `name` and `type` always
come."""
DETAIL_SCHEMA = arguments(
    name={"type": "string", "minLength": 1, "maxLength": 1024, "description": "The object's name."},
    limit={
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_PAGE,
        "default": DETAIL_CHILDREN,
        "description": f"At most this many children listed. Without it the answer's lists stop at about {BUDGET} "
        "characters in all (cut_at_budget says so); with it they are whole, the children up to this many.",
    },
    fields={
        "type": "array",
        "items": {"type": "string", "enum": ["name", "type", *DETAIL_FIELDS]},
        "maxItems": len(DETAIL_FIELDS) + 2,
        "default": list(DETAIL_FIELDS),
        # Blender keeps no index of an object's children or collections, and none can be kept across agent code
        # (it may reparent or relink anything without a signal): together a walk in C, 0.3-0.6 s at a million.
        "description": "The fields to read besides name and type, which always come (naming them too is fine; "
        "default: all of them). children and "
        "collections each cost a walk over every object in the file, and so do the dimensions of an object with "
        "a parent, modifiers, constraints, shape keys or animation in a background Blender: in a big scene, leave "
        "out what you do not need.",
    },
)


def object_detail(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    name = arguments["name"]
    obj = scene_index.object_named(name)
    if obj is None:
        close = sorted(n for n in (name_of(o) for o in bpy.data.objects) if name.lower() in n.lower())[:10]
        raise ToolError(f"No object named {name!r} in this file", state="not_found", similar_names=close)
    wanted = set(arguments.get("fields", DETAIL_FIELDS))
    children = sorted(obj.children, key=_name) if "children" in wanted else []
    lists = {key: read(obj) for key, read in _LISTS.items() if key in wanted}
    if "children" in wanted:
        lists["children"] = [name_of(child) for child in children[: arguments.get("limit", DETAIL_CHILDREN)]]
    kept, cut = budgeted(lists, sized="limit" in arguments)
    answer: dict[str, Any] = {"status": "ok", "name": name_of(obj), "type": obj.type}
    for field in (field for field in DETAIL_FIELDS if field in wanted):
        answer[field] = kept[field] if field in kept else _FACTS[field](obj)
        if field == "children":
            answer["children_total"] = len(children)
    return {**answer, **cut}


def _rotation(obj: Any) -> dict[str, Any]:
    return {"mode": obj.rotation_mode, "euler": list(obj.rotation_euler), "quaternion": list(obj.rotation_quaternion)}


def _visibility(obj: Any) -> dict[str, bool]:
    view_layer = bpy.context.view_layer
    return {
        "visible": obj.visible_get(view_layer=view_layer),
        "hide_viewport": obj.hide_viewport,
        "hide_render": obj.hide_render,
        "hidden_in_view_layer": obj.hide_get(view_layer=view_layer),
    }


_LISTS: dict[str, Callable[[Any], list[Any]]] = {
    # In this order they share the budget, children last (`object_detail` adds them).
    "modifiers": lambda obj: [
        {"name": name_of(m), "type": m.type, "show_viewport": m.show_viewport, "show_render": m.show_render}
        for m in obj.modifiers
    ],
    "constraints": lambda obj: [{"name": name_of(c), "type": c.type, "enabled": c.enabled} for c in obj.constraints],
    "materials": lambda obj: [name_of(s.material) if s.material is not None else None for s in obj.material_slots],
    "collections": lambda obj: [name_of(collection) for collection in obj.users_collection],
}


def _dimensions(obj: Any) -> list[float]:
    """The object's evaluated size, evaluating nothing but it.

    `view_layer.update()` in a background Blender evaluates the whole scene after any change (1.1 s at 20,000
    objects, 10 s and 2.35 GiB at 100,000). A scene of its own holding just this object evaluates it with what
    it depends on (parent, modifier targets, drivers) in about 11 ms, the same numbers, and is removed again;
    the file is left as it was (not even marked changed). The interactive Blender evaluates after every change,
    so there the object's own dimensions are current.
    """
    if not bpy.app.background:
        return list(obj.dimensions)
    own = _own_dimensions(obj)
    if own is not None:
        return own
    scene = bpy.data.scenes.new("hermes-measure")
    try:
        scene.collection.objects.link(obj)
        with bpy.context.temp_override(scene=scene, view_layer=scene.view_layers[0]):
            depsgraph = bpy.context.evaluated_depsgraph_get()
            return list(obj.evaluated_get(depsgraph).dimensions)
    finally:
        bpy.data.scenes.remove(scene)


WITHOUT_BOUNDS = frozenset({"EMPTY", "CAMERA", "LIGHT", "SPEAKER"})
"""Object types Blender gives no bounds in every line we serve: their dimensions are zero (a light probe has
bounds from Blender 5.3 on)."""


def _own_dimensions(obj: Any) -> list[float] | None:
    """The size read from the object's own data when nothing evaluated can differ from it: a mesh or an empty with
    no parent, constraints, modifiers, shape keys or animation. A scene of its own costs a walk over every object
    (linking syncs every view layer, removing remaps every datablock: 120 ms at 200,000 objects); this costs the
    object's vertices. Blender's arithmetic, in single precision: the bounds' extent times each axis's scale."""
    if obj.parent is not None or obj.constraints or obj.modifiers or obj.animation_data is not None:
        return None
    if obj.type in WITHOUT_BOUNDS:
        return [0.0, 0.0, 0.0]
    mesh = obj.data
    if obj.type != "MESH" or mesh.shape_keys is not None or mesh.animation_data is not None or mesh.is_editmode:
        return None
    count = len(mesh.vertices)
    if not count:
        return [0.0, 0.0, 0.0]
    co = array.array("f", bytes(12 * count))
    mesh.vertices.foreach_get("co", co)
    scale = array.array("f", (abs(s * d) for s, d in zip(obj.scale, obj.delta_scale, strict=True)))
    extent = array.array("f", (max(co[axis::3]) - min(co[axis::3]) for axis in range(3)))
    return list(array.array("f", (e * s for e, s in zip(extent, scale, strict=True))))


_FACTS: dict[str, Callable[[Any], Any]] = {
    "data_name": lambda obj: name_of(obj.data) if obj.data is not None else None,
    "location": lambda obj: list(obj.location),
    "rotation": _rotation,
    "scale": lambda obj: list(obj.scale),
    "dimensions": _dimensions,
    "parent": lambda obj: name_of(obj.parent) if obj.parent is not None else None,
    "visibility": _visibility,
}


GET_OBJECT_DETAIL_SUMMARY = Tool(
    name="get_object_detail_summary",
    title="One object in detail",
    description=(
        "Details of one object by name: type, data, transform (location, rotation, scale, dimensions), parent and "
        "children, modifiers, constraints, material slots, visibility and collections. Its lists stop at about "
        f"{BUDGET} characters unless you pass limit; fields picks what to read (in a big scene, children and "
        "collections cost a walk over every object)."
    ),
    run=object_detail,
    input_schema=DETAIL_SCHEMA,
    output_schema=shallow(
        required=("status", "name", "type"),
        status="string",
        name="string",
        type="string",
        data_name=["string", "null"],
        location="array",
        rotation="object",
        scale="array",
        dimensions="array",
        parent=["string", "null"],
        children="array",
        children_total="integer",
        modifiers="array",
        constraints="array",
        materials="array",
        visibility="object",
        collections="array",
    ),
)
