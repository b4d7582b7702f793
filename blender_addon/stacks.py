"""What an object's modifiers and constraints are set to, as a value that compares equal only when nothing moved.

Blender names no update of an object it does not evaluate (a hidden one): a bevel added to a hidden chair, or its
width changed, is seen only by comparing what the stack was with what it is (`changes.Scene._unseen_changed`).
Each item is read through its RNA properties (pointers to datablocks by session uid, nested structs read the same
way a few levels down, lists left out) and its ID properties: a geometry-nodes modifier's inputs are ID properties
up to Blender 5.2 and nested structs (`properties.inputs.<socket>.value`) from 5.3. The property names are looked up
once per kind of struct.
"""

from __future__ import annotations

from typing import Any

import bpy

Settings = tuple[Any, ...]

_NOT_SETTINGS = frozenset(
    {
        "rna_type",
        "is_override_data",
        "is_override_data_editable",
        "is_active",
        "show_expanded",
        "show_group_selector",
        "show_manage_panel",
        "execution_time",
    }
)
"""Properties that change nothing of the result: identity, the panels the UI shows folded or open, which item is
active in the UI, how long the last evaluation took."""
_DEPTH = 3
"""Nested structs read below an item: a 5.3 geometry-nodes input is three down (properties, inputs, the socket)."""
_fields: dict[Any, tuple[tuple[tuple[str, str], ...], bool]] = {}
"""By kind of struct (its RNA definition): its settings' names and types, and whether it holds ID properties."""


def stack(items: Any) -> tuple[Settings, ...]:
    """Each of `items`' (`obj.modifiers`, `obj.constraints`) settings, in order: empty when there is none."""
    return tuple(_settings(item, 0) for item in items) if len(items) else ()


def _settings(item: Any, depth: int) -> Settings:
    rna = item.bl_rna
    known = _fields.get(rna)
    if known is None:
        known = _fields[rna] = (
            tuple(
                (prop.identifier, prop.type)
                for prop in rna.properties
                if prop.type != "COLLECTION"
                and prop.identifier not in _NOT_SETTINGS
                and not prop.identifier.startswith("open_")
            ),
            _holds_id_properties(item),
        )
    fields, custom = known
    values: list[Any] = [rna.identifier]
    for name, rna_type in fields:
        value = getattr(item, name, None)
        if rna_type == "POINTER":
            if isinstance(value, bpy.types.ID):
                value = value.session_uid
            elif value is not None:
                value = _settings(value, depth + 1) if depth < _DEPTH else None
        elif not isinstance(value, (str, int, float, bool)) and value is not None:
            value = tuple(value)  # arrays (a bpy_prop_array, a mathutils vector) and enum sets
        values.append(value)
    if custom:
        values.extend((key, _plain(item[key])) for key in item.keys())
    return tuple(values)


def _holds_id_properties(item: Any) -> bool:
    try:
        item.keys()
    except TypeError:  # "this type doesn't support IDProperties" (constraints; modifiers from Blender 5.3)
        return False
    return True


def _plain(value: Any) -> Any:
    """An ID property's value as something that compares by value."""
    if isinstance(value, bpy.types.ID):
        return value.session_uid
    if hasattr(value, "to_dict"):
        return repr(value.to_dict())
    if hasattr(value, "to_list"):
        return tuple(value.to_list())
    return value
