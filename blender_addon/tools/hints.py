"""A short hint for agent code that failed, read from the running Blender's own API: the names that exist where the
code asked for one that does not (a property, a socket, an enum item, a node type), and what an operator whose
context check failed needs. Built only when the code raised, so a call that succeeds pays nothing; it never hides
the traceback, and says nothing rather than guess when the error is not one it knows.
"""

from __future__ import annotations

import ast
import difflib
import re
from types import TracebackType
from typing import Any

import bpy

HINT_CHARS = 400
"""A hint stays short: the traceback says the rest."""
SHOWN = 3
"""Nearest names a hint gives."""
KEYS_READ = 5000
"""Names read at most from one collection to find the nearest (a scene's objects may be a million)."""
RENAMED = {
    "Subsurface": "Subsurface Weight",
    "Specular": "Specular IOR Level",
    "Transmission": "Transmission Weight",
    "Clearcoat": "Coat Weight",
    "Clearcoat Roughness": "Coat Roughness",
    "Clearcoat Normal": "Coat Normal",
    "Sheen": "Sheen Weight",
    "Emission": "Emission Color",
}
"""Principled BSDF inputs renamed in Blender 4.0, by their old names: offered only where the new name exists in the
collection the code used (the running Blender decides)."""
_KEY_ERROR = re.compile(r'key "(.*)" not found')
_NO_ATTRIBUTE = re.compile(r"'(\w+)' object has no attribute '(\w+)'")
_ENUM_ERROR = re.compile(r'enum "(.*?)" not found in \((.*)\)', re.S)
_NODE_TYPE = re.compile(r"Node type (.*) undefined")
_POLL = re.compile(r"Operator bpy\.ops\.(\w+)\.(\w+)\.poll\(\) failed")


def hint_for(exc: BaseException, code: str, filename: str) -> str | None:
    """A hint for `exc`, raised by agent code `code` (compiled as `filename`), or None."""
    try:
        found = _hint(exc, code, filename)
    except Exception:  # a hint is a courtesy: reading the API must never fail the answer
        return None
    if found is None:
        return None
    return found if len(found) <= HINT_CHARS else found[: HINT_CHARS - 1] + "…"


def _hint(exc: BaseException, code: str, filename: str) -> str | None:
    text = str(exc)
    if isinstance(exc, AttributeError) and exc.name and exc.obj is not None:
        return _attribute(exc.obj, exc.name)
    if isinstance(exc, AttributeError) and (missing := _NO_ATTRIBUTE.search(text)):
        kind = getattr(bpy.types, missing.group(1), None)  # bpy's own refusal (and Python 3.11) names no object
        return _attribute(kind, missing.group(2)) if kind is not None else None
    if isinstance(exc, KeyError) and (key := _KEY_ERROR.search(text)):
        return _key(key.group(1), _agent_frame(exc.__traceback__, filename), code)
    if isinstance(exc, TypeError) and (enum := _ENUM_ERROR.search(text)):
        return _enum(enum.group(1), enum.group(2))
    if isinstance(exc, RuntimeError) and (node := _NODE_TYPE.search(text)):
        return _node_type(node.group(1).strip())
    if isinstance(exc, RuntimeError) and (poll := _POLL.search(text)):
        return _operator_context(poll.group(1), poll.group(2))
    return None


def _nearest(name: str, candidates: list[str]) -> list[str]:
    return difflib.get_close_matches(name, candidates, n=SHOWN, cutoff=0.5)


def _attribute(obj: Any, name: str) -> str | None:
    """A property or function `obj`'s type has not: the nearest of those it has (RNA's, for a Blender struct)."""
    rna = getattr(obj, "bl_rna", None)
    if rna is not None:
        candidates = [p.identifier for p in rna.properties if p.identifier != "rna_type"]
        candidates += [f.identifier for f in rna.functions]
        kind = rna.identifier
    else:
        candidates = [entry for entry in dir(obj) if not entry.startswith("_")]
        kind = type(obj).__name__
    near = _nearest(name, candidates)
    if not near:
        return f"{kind} in Blender {bpy.app.version_string} has no {name!r}; lookup_blender_api({kind!r}) lists what it has"
    return f"{kind} has no {name!r} in Blender {bpy.app.version_string}; did you mean {_either(near)}?"


def _key(key: str, frame: Any, code: str) -> str | None:
    """A name a collection has not: the collection the failing line subscripted, read again from the frame (only a
    chain of names and attributes, which reads and changes nothing), and the nearest of its keys."""
    collection = _subscripted(key, frame, code)
    if collection is None or not hasattr(collection, "keys"):
        return None
    keys = [str(k) for k in list(collection.keys())[:KEYS_READ]]
    renamed = RENAMED.get(key)
    if renamed is not None and renamed in keys and renamed != key:
        return (
            f"{key!r} was renamed {renamed!r} in Blender 4.0; this Blender ({bpy.app.version_string}) has {renamed!r}"
        )
    near = _nearest(key, keys)
    if near:
        return f"no {key!r} here; did you mean {_either(near)}?"
    shown = ", ".join(repr(k) for k in keys[:8])
    return f"no {key!r} here; it has {shown}" + (" and more" if len(keys) > 8 else "")


def _enum(value: str, listed: str) -> str:
    """An enum item that does not exist: the nearest of those the error lists (Blender names them all)."""
    items = re.findall(r"'([^']*)'", listed)
    near = _nearest(value, items) or [item for item in items if value.lower() in item.lower()][:SHOWN]
    if near:
        return f"{value!r} is not an option in Blender {bpy.app.version_string}; did you mean {_either(near)}?"
    return f"{value!r} is not an option in Blender {bpy.app.version_string}; the error lists the valid ones"


def _node_type(name: str) -> str | None:
    """A node added by its name in the interface (or a misspelt type): the identifiers that name has."""
    types = node_types()
    exact = sorted({idname for idname, ui in types if ui.lower() == name.lower()})
    if exact:
        return f"nodes.new() takes the type's identifier, not its name: {name!r} is {_either(exact)}"
    near = _nearest(name, [idname for idname, _ in types]) or sorted(
        {idname for idname, ui in types if ui in _nearest(name, [ui for _, ui in types])}
    )
    return f"no node type {name!r}; did you mean {_either(near)}?" if near else None


def node_types() -> list[tuple[str, str]]:
    """(bl_idname, interface name) of every node type this Blender registers (`bpy.types` makes a type's class at
    its first look, so they are looked at by name, not found among subclasses)."""
    found: list[tuple[str, str]] = []
    for name in dir(bpy.types):
        kind = getattr(bpy.types, name, None)
        if not (isinstance(kind, type) and issubclass(kind, bpy.types.Node)) or name in ABSTRACT_NODES:
            continue
        found.append((getattr(kind, "bl_idname", "") or name, kind.bl_rna.name))
    return found


ABSTRACT_NODES = frozenset(
    {"Node", "NodeInternal", "ShaderNode", "GeometryNode", "CompositorNode", "TextureNode", "FunctionNode"}
)
"""Bases of node types, never a node of their own."""


def _operator_context(module: str, name: str) -> str:
    """An operator whose poll() refused this context: what it is, and what to do instead."""
    operator = getattr(getattr(bpy.ops, module), name)
    description = operator.get_rna_type().description.strip().rstrip(".")
    where = (
        "this Blender runs in the background, with no window or 3D View: do it with the data API (bpy.data, "
        "object and mesh properties, bmesh) instead"
        if bpy.app.background
        else "run it where it applies, e.g. `with bpy.context.temp_override(area=<a VIEW_3D area>): ...`, or use "
        "the data API"
    )
    return f"bpy.ops.{module}.{name} ({description}) cannot run in this context: {where}"


def _either(names: list[str]) -> str:
    return " or ".join(repr(name) for name in names)


def _agent_frame(tb: TracebackType | None, filename: str) -> Any:
    """The last frame of the agent's own code in the traceback."""
    frame = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            frame = tb
        tb = tb.tb_next
    return frame


def _subscripted(key: str, tb: Any, code: str) -> Any | None:
    """What the failing line subscripted with `key`, when that is a chain of names and attributes."""
    if tb is None:
        return None
    lines = code.splitlines()
    if not 0 < tb.tb_lineno <= len(lines):
        return None
    try:
        tree = ast.parse(lines[tb.tb_lineno - 1].strip())
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == key
            and _plain(node.value)
        ):
            frame = tb.tb_frame
            root = _root(node.value)
            start = frame.f_locals.get(root, frame.f_globals.get(root))
            if not (start is bpy or isinstance(start, (bpy.types.bpy_struct, bpy.types.bpy_prop_collection))):
                return None  # only Blender's own data is read again: an object of the agent's could run its code
            return eval(compile(ast.Expression(node.value), "<hint>", "eval"), frame.f_globals, frame.f_locals)
    return None


def _root(node: ast.AST) -> str:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _plain(node: ast.AST) -> bool:
    """Names, attributes and subscripts by constants only: reading it again calls nothing the agent wrote."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return _plain(node.value)
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and _plain(node.value)
    return False
