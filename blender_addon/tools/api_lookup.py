"""`lookup_blender_api`: the running Blender's own API, read from its RNA at call time (never a copy made at build
time): a struct, a property path, an operator with its parameters and whether it can run here, an enum's items, or
the nearest names to a query that matches none. Every answer names the Blender it came from and fits the budget.
"""

from __future__ import annotations

import difflib
from functools import cache
from typing import Any

import bpy

from ..budget import budgeted
from ..errors import ToolError
from .base import READ_ONLY, Tool, arguments, shallow
from .context import JobContext

MAX_QUERY = 200
SHOWN_MATCHES = 8


def lookup(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    query = _query(arguments["query"])
    found = _operator(query) or _property_path(query) or _struct(query)
    if found is None:
        found = {"kind": "no_match", "query": query, "did_you_mean": _nearest(query)}
    lists = {
        key: found.pop(key)
        for key in ("properties", "functions", "parameters", "items", "did_you_mean")
        if key in found
    }
    kept, cut = budgeted(lists, sized=False)
    return {"status": "ok", "blender_version": bpy.app.version_string, **found, **kept, **cut}


def _query(raw: str) -> str:
    query = raw.strip()
    if not query:
        raise ToolError(
            "query is empty: name a struct (Object), a property (Object.location, "
            "scene.render.engine) or an operator (bpy.ops.mesh.primitive_cube_add)",
            state="invalid_arguments",
        )
    if len(query) > MAX_QUERY or any(ord(c) < 32 or ord(c) == 127 for c in query):
        raise ToolError(f"query must be at most {MAX_QUERY} printable characters", state="invalid_arguments")
    return query.removeprefix("bpy.types.")


def _struct(name: str) -> dict[str, Any] | None:
    kind = getattr(bpy.types, name, None)
    rna = getattr(kind, "bl_rna", None)
    if rna is None:
        return None
    base = rna.base.identifier if rna.base is not None else None
    return {
        "kind": "struct",
        "name": rna.identifier,
        "description": rna.description,
        "base": base,
        "properties": [_brief(prop) for prop in rna.properties if prop.identifier != "rna_type"],
        "functions": [_function(function) for function in rna.functions],
    }


def _property_path(query: str) -> dict[str, Any] | None:
    """`Struct.prop` or a context path (`scene.render.engine`, `bpy.context.object.location`)."""
    parts = query.removeprefix("bpy.context.").split(".")
    if len(parts) < 2:
        return None
    owner_rna = getattr(getattr(bpy.types, parts[0], None), "bl_rna", None)
    if owner_rna is not None and len(parts) == 2:
        prop = owner_rna.properties.get(parts[1])
        return _property(owner_rna.identifier, prop) if prop is not None else None
    owner: Any = bpy.context
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    rna = getattr(owner, "bl_rna", None)
    prop = rna.properties.get(parts[-1]) if rna is not None else None
    if prop is None:
        return None
    answer = _property(rna.identifier, prop)
    try:
        value = getattr(owner, parts[-1])
        answer["value"] = value if isinstance(value, bool | int | float | str) else str(value)
    except Exception:  # a value Blender will not read here: the description still stands
        pass
    return answer


def _property(owner: str, prop: Any) -> dict[str, Any]:
    answer = {"kind": "property", "owner": owner, **_brief(prop), "description": prop.description}
    if prop.type == "ENUM":
        answer["items"] = [
            {"identifier": i.identifier, "name": i.name, "description": i.description} for i in prop.enum_items
        ]
    if prop.type in ("INT", "FLOAT"):
        answer.update(min=prop.hard_min, max=prop.hard_max, soft_min=prop.soft_min, soft_max=prop.soft_max)
    return answer


def _operator(query: str) -> dict[str, Any] | None:
    parts = query.removeprefix("bpy.ops.").split(".")
    if not query.startswith("bpy.ops.") or len(parts) != 2:
        return None
    module = getattr(bpy.ops, parts[0], None)
    operator = getattr(module, parts[1], None) if module is not None else None
    try:
        rna = operator.get_rna_type() if operator is not None else None
    except (KeyError, AttributeError):  # bpy.ops answers any name; only a registered one has a type
        return None
    if rna is None:
        return None
    try:
        runs_here: bool | None = bool(operator.poll())
    except Exception:
        runs_here = None
    return {
        "kind": "operator",
        "name": f"bpy.ops.{parts[0]}.{parts[1]}",
        "description": rna.description,
        "runs_here": runs_here,
        "parameters": [_brief(prop) for prop in rna.properties if prop.identifier != "rna_type"],
    }


def _brief(prop: Any) -> dict[str, Any]:
    """One property in a line: its identifier, type, default where it has one, and an enum's identifiers."""
    entry: dict[str, Any] = {"identifier": prop.identifier, "type": prop.type}
    if prop.type in ("BOOLEAN", "INT", "FLOAT", "STRING"):
        length = getattr(prop, "array_length", 0)
        default = list(prop.default_array) if length else prop.default
        entry["default"] = default
        if length:
            entry["length"] = length
    elif prop.type == "ENUM":
        entry["items"] = [item.identifier for item in prop.enum_items]
        if prop.is_enum_flag:
            entry["flag"] = True
    elif prop.type in ("POINTER", "COLLECTION"):
        entry["of"] = prop.fixed_type.identifier
    if prop.is_readonly:
        entry["readonly"] = True
    return entry


def _function(function: Any) -> dict[str, Any]:
    parameters = [p.identifier for p in function.parameters if not p.is_output]
    returns = [p.identifier for p in function.parameters if p.is_output]
    return {"identifier": function.identifier, "parameters": parameters, **({"returns": returns} if returns else {})}


def _nearest(query: str) -> list[str]:
    """The struct names, `Struct.property` paths and operators nearest to `query`, best first: those containing its
    last word, then those whose last word is close to it (of the nearest struct first, for `Struct.prop`)."""
    names, by_word, structs = _names()
    word = query.rsplit(".", 1)[-1]
    ranked = [name for name in names if len(word) >= 3 and word.lower() in name.lower()]
    ranked.sort(key=lambda name: (name.rsplit(".", 1)[-1].lower() != word.lower(), len(name)))
    owners = difflib.get_close_matches(query.split(".")[0], structs, n=2, cutoff=0.6) if "." in query else []
    for close in difflib.get_close_matches(word.lower(), list(by_word), n=SHOWN_MATCHES, cutoff=0.6):
        paths = by_word[close]
        ranked += [path for path in paths if path.split(".")[0] in owners] + paths[:SHOWN_MATCHES]
    return list(dict.fromkeys(ranked))[:SHOWN_MATCHES]


@cache
def _names() -> tuple[list[str], dict[str, list[str]], list[str]]:
    """Every struct, `Struct.property` and operator this Blender has, read once from its RNA, and the same by their
    last word lowercased (an add-on registered later is missing until the next Blender: a look-up then answers the
    nearest names, never a wrong one)."""
    names: list[str] = []
    structs: list[str] = []
    for name in dir(bpy.types):
        rna = getattr(getattr(bpy.types, name, None), "bl_rna", None)
        if rna is None:
            continue
        names.append(name)
        structs.append(name)
        names.extend(f"{name}.{prop.identifier}" for prop in rna.properties if prop.identifier != "rna_type")
    for module in dir(bpy.ops):
        names.extend(f"bpy.ops.{module}.{operator}" for operator in dir(getattr(bpy.ops, module)))
    by_word: dict[str, list[str]] = {}
    for name in names:
        by_word.setdefault(name.rsplit(".", 1)[-1].lower(), []).append(name)
    return names, by_word, structs


LOOKUP_BLENDER_API = Tool(
    name="lookup_blender_api",
    title="Look up Blender's API",
    description=(
        "Read the running Blender's own Python API before writing code against it (Blender renames things every "
        "release): a struct ('Object', 'bpy.types.Material': its properties with types, defaults and enum items, "
        "and its functions), a property ('Object.location', 'scene.render.engine': type, range, default, enum "
        "items, the current value for a context path), or an operator ('bpy.ops.mesh.primitive_cube_add': its "
        "parameters and whether it can run in this context). A query that matches nothing answers the nearest "
        "names (did_you_mean). Every answer names the Blender version it came from."
    ),
    run=lookup,
    input_schema=arguments(
        query={"type": "string", "maxLength": MAX_QUERY, "description": "A struct, a property path or an operator"}
    ),
    output_schema=shallow(
        required=("status", "blender_version", "kind"), status="string", blender_version="string", kind="string"
    ),
    annotations=dict(READ_ONLY),
)
