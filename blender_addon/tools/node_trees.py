"""`get_node_tree`: a node tree as compact JSON a model can edit from (and rebuild): its nodes with their type,
name, label, location and what differs from a new node of their type (unlinked inputs, properties), its links by
socket identifiers, a group's interface, and the groups it uses by name. Paged by nodes; read, never changed (the
defaults come from scratch nodes made and removed unrecorded).
"""

from __future__ import annotations

from typing import Any

import bpy

from ..budget import budgeted
from ..errors import ToolError
from ..names import name_of
from .base import READ_ONLY, Tool, arguments, shallow
from .context import JobContext

OWNERS = {
    "material": "materials",
    "world": "worlds",
    "light": "lights",
    "node_group": "node_groups",
    "scene": "scenes",
}
"""Datablocks that hold a node tree, by the word an owner starts with (`material:Wood`)."""
DEFAULT_LIMIT = 200
MAX_OWNER = 400
_VALUE_TYPES = (bool, int, float, str)


def node_tree(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    owner = arguments["owner"]
    tree = _tree_of(owner)
    offset, limit = arguments.get("offset", 0), arguments.get("limit", DEFAULT_LIMIT)
    nodes = list(tree.nodes)
    page = nodes[offset : offset + limit]
    shown = {node.name for node in page}
    with job.changes.unrecorded():
        defaults = _Defaults(tree.bl_idname)
        try:
            entries = [_node(node, defaults) for node in page]
        finally:
            defaults.close()
    links = [
        {
            "from_node": link.from_node.name,
            "from_socket": link.from_socket.identifier,
            "to_node": link.to_node.name,
            "to_socket": link.to_socket.identifier,
        }
        for link in tree.links
        if link.from_node.name in shown or link.to_node.name in shown
    ]
    groups = sorted({name_of(node.node_tree) for node in nodes if getattr(node, "node_tree", None) is not None})
    lists, cut = budgeted({"nodes": entries, "links": links}, sized=False)
    answer: dict[str, Any] = {
        "status": "ok",
        "blender_version": bpy.app.version_string,
        "owner": owner,
        "tree": name_of(tree),
        "tree_type": tree.bl_idname,
        "summary": _said(tree, nodes, groups),
        "node_count": len(nodes),
        "offset": offset,
        "next_offset": offset + limit if offset + limit < len(nodes) else None,
        **lists,
        "groups": groups,
        **cut,
    }
    if interface := _interface(tree):
        answer["interface"] = interface
    return answer


def _tree_of(owner: str) -> Any:
    """The node tree `owner` names: `material:Wood`, `world:World`, `light:Light`, `node_group:Name`,
    `scene:Scene` (its compositor), `object:Cube/modifier:GeometryNodes`."""
    if not owner.strip() or len(owner) > MAX_OWNER or any(ord(c) < 32 for c in owner):
        raise ToolError(f"owner must be 1 to {MAX_OWNER} printable characters", state="invalid_arguments")
    kind, _, name = owner.partition(":")
    if kind == "object":
        object_name, _, modifier = name.partition("/modifier:")
        obj = bpy.data.objects.get(object_name)
        holder = obj.modifiers.get(modifier) if obj is not None else None
        if holder is None:
            raise ToolError(f"no object {object_name!r} with a modifier {modifier!r}", state="not_found")
        tree = getattr(holder, "node_group", None)
    elif kind in OWNERS:
        holder = getattr(bpy.data, OWNERS[kind]).get(name)
        if holder is None:
            raise ToolError(f"no {kind} {name!r} in this file", state="not_found")
        if kind == "node_group":
            tree = holder
        elif kind == "scene":
            tree = getattr(holder, "compositing_node_group", None) or getattr(holder, "node_tree", None)
        else:
            tree = holder.node_tree
    else:
        raise ToolError(
            f"owner {owner!r} is not one of material:, world:, light:, node_group:, scene: (its compositor) or "
            "object:NAME/modifier:MODIFIER",
            state="invalid_arguments",
        )
    if tree is None:
        raise ToolError(f"{owner} has no node tree", state="no_node_tree")
    return tree


class _Defaults:
    """What a new node of each type holds, from scratch nodes in one scratch tree (removed by `close`)."""

    def __init__(self, tree_type: str) -> None:
        self._tree = bpy.data.node_groups.new(".hermes-defaults", tree_type)
        self._made: dict[str, Any] = {}

    def of(self, node: Any) -> Any | None:
        kind = node.bl_idname
        if kind not in self._made:
            try:
                self._made[kind] = self._tree.nodes.new(kind)
            except RuntimeError:
                self._made[kind] = None
        return self._made[kind]

    def close(self) -> None:
        bpy.data.node_groups.remove(self._tree)


def _node(node: Any, defaults: _Defaults) -> dict[str, Any]:
    fresh = defaults.of(node)
    entry: dict[str, Any] = {
        "name": node.name,
        "type": node.bl_idname,
        "location": [round(v, 1) for v in node.location],
    }
    if node.label:
        entry["label"] = node.label
    if node.parent is not None:
        entry["parent"] = node.parent.name
    if getattr(node, "node_tree", None) is not None:
        entry["node_tree"] = name_of(node.node_tree)
    inputs = {}
    for index, socket in enumerate(node.inputs):
        if socket.is_linked or not hasattr(socket, "default_value"):
            continue
        value = _value(socket.default_value)
        base = fresh.inputs[index] if fresh is not None and index < len(fresh.inputs) else None
        if base is None or value != _value(getattr(base, "default_value", None)):
            inputs[socket.identifier] = value
    if inputs:
        entry["inputs"] = inputs
    properties = {}
    for prop in node.bl_rna.properties:
        if prop.identifier in _GENERIC or prop.type in ("POINTER", "COLLECTION") or prop.is_readonly:
            continue
        value = _value(getattr(node, prop.identifier))
        if fresh is None or value != _value(getattr(fresh, prop.identifier)):
            properties[prop.identifier] = value
    if properties:
        entry["properties"] = properties
    return entry


_GENERIC = frozenset(p.identifier for p in bpy.types.Node.bl_rna.properties if p.identifier not in ("mute", "hide")) | {
    "location",
    "width",
    "height",
    "name",
    "label",
    "parent",
    "select",
    "show_options",
    "show_preview",
}
"""Said elsewhere in an entry, or the node editor's own state."""


def _value(value: Any) -> Any:
    if isinstance(value, _VALUE_TYPES) or value is None:
        return round(value, 6) if isinstance(value, float) else value
    if isinstance(value, bpy.types.ID):
        return name_of(value)
    try:
        return [round(v, 6) if isinstance(v, float) else v for v in value]
    except TypeError:
        return str(value)


def _interface(tree: Any) -> list[dict[str, Any]]:
    """A group's inputs and outputs (Blender 4.0 and later: `interface.items_tree`)."""
    interface = getattr(tree, "interface", None)
    if interface is None:
        return []
    return [
        {"in_out": item.in_out, "name": item.name, "identifier": item.identifier, "socket_type": item.socket_type}
        for item in interface.items_tree
        if item.item_type == "SOCKET"
    ]


def _said(tree: Any, nodes: list[Any], groups: list[str]) -> str:
    kinds: dict[str, int] = {}
    for node in nodes:
        kinds[node.bl_rna.name] = kinds.get(node.bl_rna.name, 0) + 1
    most = ", ".join(f"{n} {kind}" if n > 1 else kind for kind, n in sorted(kinds.items(), key=lambda k: -k[1])[:6])
    more = " and more" if len(kinds) > 6 else ""
    uses = f"; uses groups {', '.join(groups)}" if groups else ""
    return f"{name_of(tree)}: {len(nodes)} nodes ({most}{more}), {len(tree.links)} links{uses}"


GET_NODE_TREE = Tool(
    name="get_node_tree",
    title="A node tree as JSON",
    description=(
        "A node tree as compact JSON to read or rebuild: owner 'material:Wood', 'world:World', 'light:Light', "
        "'node_group:Name', 'scene:Scene' (its compositor) or 'object:Cube/modifier:GeometryNodes'. Nodes (type "
        "identifier, name, label, location, the inputs and properties that differ from a new node of that type), "
        "links by socket identifiers, a group's interface, nested groups by name, and a one-line summary. Paged "
        "by nodes (offset, limit; links of the page's nodes)."
    ),
    run=node_tree,
    input_schema=arguments(
        owner={"type": "string", "maxLength": MAX_OWNER, "description": "What holds the tree, e.g. material:Wood"},
        offset={"type": "integer", "minimum": 0, "default": 0},
        limit={"type": "integer", "minimum": 1, "maximum": 1000, "default": DEFAULT_LIMIT},
    ),
    output_schema=shallow(
        required=("status", "tree", "nodes", "links", "summary"),
        status="string",
        tree="string",
        nodes="array",
        links="array",
        summary="string",
    ),
    annotations=dict(READ_ONLY),
)
