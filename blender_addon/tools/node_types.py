"""`describe_node_type`: a node type as this Blender registers it, read from a node made in a scratch tree that
leaves no trace (the tree is removed, the change record does not tell it, the revision is what it was): its inputs
and outputs with identifiers, types and defaults, its own properties with their enum items.
"""

from __future__ import annotations

import difflib
from typing import Any

import bpy

from ..budget import budgeted
from ..errors import ToolError
from .base import READ_ONLY, Tool, arguments, shallow
from .context import JobContext
from .hints import node_types

TREES = (
    ("Shader", "ShaderNodeTree"),
    ("Geometry", "GeometryNodeTree"),
    ("Function", "GeometryNodeTree"),
    ("Compositor", "CompositorNodeTree"),
    ("Texture", "TextureNodeTree"),
)
"""The tree a node type is made in, by its identifier's prefix (generic nodes such as NodeFrame: any tree)."""
MAX_NAME = 200
GENERIC = frozenset(p.identifier for p in bpy.types.Node.bl_rna.properties)
"""What every node has (name, label, location, ...): a node type's own properties are the others."""


def describe(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    identifier = _identifier(arguments["node_type"])
    trees = [tree for prefix, tree in TREES if identifier.startswith(prefix)] or [tree for _, tree in TREES]
    with job.changes.unrecorded():
        for tree_type in dict.fromkeys(trees):
            tree = bpy.data.node_groups.new(".hermes-describe", tree_type)
            try:
                try:
                    node = tree.nodes.new(identifier)
                except RuntimeError:
                    continue  # not of this kind of tree
                answer = _described(node, tree_type)
            finally:
                bpy.data.node_groups.remove(tree)
            lists = {key: answer.pop(key) for key in ("inputs", "outputs", "properties")}
            kept, cut = budgeted(lists, sized=False)
            return {"status": "ok", "blender_version": bpy.app.version_string, **answer, **kept, **cut}
    raise ToolError(f"the node type {identifier!r} cannot be made in any node tree here", state="not_found")


def _identifier(raw: str) -> str:
    """A node type's identifier from itself, its name in the interface (English or the user's language), or the
    nearest one; a name that is none of these is refused with the nearest names."""
    name = raw.strip()
    if not name or len(name) > MAX_NAME or any(ord(c) < 32 for c in name):
        raise ToolError(f"node_type must be 1 to {MAX_NAME} printable characters", state="invalid_arguments")
    known = node_types()
    if name in {idname for idname, _ in known}:
        return name
    translate = bpy.app.translations.pgettext_iface
    by_name = sorted({idname for idname, ui in known if name.lower() in (ui.lower(), translate(ui).lower())})
    if by_name:
        return by_name[0]
    near = difflib.get_close_matches(name, [idname for idname, _ in known] + [ui for _, ui in known], n=5)
    raise ToolError(
        f"no node type {name!r} in Blender {bpy.app.version_string}"
        + (f"; nearest: {', '.join(near)}" if near else ""),
        state="not_found",
        did_you_mean=near,
    )


def _described(node: Any, tree_type: str) -> dict[str, Any]:
    rna = node.bl_rna
    return {
        "identifier": node.bl_idname,
        "name": rna.name,
        "name_in_interface": bpy.app.translations.pgettext_iface(rna.name),
        "description": rna.description,
        "tree_type": tree_type,
        "inputs": [_socket(socket) for socket in node.inputs],
        "outputs": [_socket(socket) for socket in node.outputs],
        "properties": [_property(prop) for prop in rna.properties if prop.identifier not in GENERIC],
    }


def _socket(socket: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": socket.name, "identifier": socket.identifier, "type": socket.type}
    if hasattr(socket, "default_value"):
        value = socket.default_value
        entry["default"] = value if isinstance(value, bool | int | float | str) else _plain(value)
    if socket.hide or not socket.enabled:
        entry["hidden"] = True
    return entry


def _property(prop: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"identifier": prop.identifier, "type": prop.type}
    if prop.type == "ENUM":
        entry["items"] = [item.identifier for item in prop.enum_items]
    elif prop.type in ("BOOLEAN", "INT", "FLOAT", "STRING") and not getattr(prop, "array_length", 0):
        entry["default"] = prop.default
    return entry


def _plain(value: Any) -> Any:
    try:
        return [round(v, 6) if isinstance(v, float) else v for v in value]
    except TypeError:
        return str(value)


DESCRIBE_NODE_TYPE = Tool(
    name="describe_node_type",
    title="Describe a node type",
    description=(
        "A node type as this Blender registers it (shader, geometry, compositor or texture nodes): its inputs and "
        "outputs (names, identifiers, types, defaults, hidden ones marked) and its own properties with their enum "
        "items. Give its identifier ('ShaderNodeBsdfPrincipled') or its name in the interface ('Principled BSDF', "
        "also in the user's language). Use it before adding nodes or setting sockets: names move between Blender "
        "versions. Read from a scratch node that leaves no trace in the file."
    ),
    run=describe,
    input_schema=arguments(
        node_type={"type": "string", "maxLength": MAX_NAME, "description": "An identifier or interface name"}
    ),
    output_schema=shallow(
        required=("status", "identifier", "inputs", "outputs"),
        status="string",
        identifier="string",
        inputs="array",
        outputs="array",
    ),
    annotations=dict(READ_ONLY),
)
