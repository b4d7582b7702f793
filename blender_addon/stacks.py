"""What an object's modifiers and constraints are set to, as a value that compares equal only when nothing moved.

Blender names no update of an object it does not evaluate (a hidden one): a bevel added to a hidden chair, or its
width changed, is seen only by comparing what the stack was with what it is (`changes.Scene._unseen_changed`).
Each item is read through its settings: its writable RNA properties (read in one C call), pointers to datablocks by
session uid, nested structs and lists of them read the same way a few levels down (an armature constraint's
targets, a bevel's custom profile), and its ID properties. A geometry-nodes modifier's inputs are its ID properties
before Blender 5.2.3 and nested structs (`properties.inputs.<socket>.value`) from 5.2.3 on, which Blender builds
again whenever the group's inputs change: those are kept by their class and property names, never by address.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import bpy

from . import log

Settings = tuple[Any, ...]

_NOT_SETTINGS = frozenset(
    {
        "rna_type",
        "is_override_data",
        "is_override_data_editable",
        "is_active",
        "active",
        "select",
        "show_expanded",
        "show_group_selector",
        "show_manage_panel",
        "ui_type",
        "node_warnings",
        "cache_data_format",
        "cache_mesh_format",
        "cache_noise_format",
        "cache_particle_format",
        "openvdb_cache_compress_type",
        "openvdb_data_depth",
    }
)
"""Writable properties (and lists) that change nothing of the result: the panels the UI shows folded or open, which
item is active or selected in it, which tab of a modifier's panel shows, the warnings of the last evaluation; and a
fluid bake's file formats, whose reads Blender answers with a console warning where its build lacks the format
(they change the bake's files, not the scene)."""
_DEPTH = 3
"""Nested structs read below an item: a geometry-nodes input (5.2.3 on) is three down (properties, inputs, the socket)."""
_UNREADABLE = ("unreadable",)

Kind = tuple[Callable[[Any], tuple[Any, ...]], tuple[tuple[int, str], ...], frozenset[str] | None]
"""How one kind of struct is read: all its settings in one call, which of them need more than their value (by
index: "struct", "list" or "array"), and when it holds ID properties, the names its settings read already (the
geometry-nodes inputs are ID properties shown as settings too)."""
_kinds: dict[Any, Kind] = {}
"""By registered struct class (modifiers, constraints and their nested settings), and by class and property names
for the structs Blender builds at runtime (their names are read each time: cheaper than their properties)."""
_KINDS_KEPT = 4096
"""Runtime-built kinds kept at most: each change of a group's inputs makes new ones."""


def stack(items: Any) -> tuple[Settings, ...]:
    """Each of `items`' (`obj.modifiers`, `obj.constraints`) settings, in order: empty when there is none. A stack
    that cannot be read (a struct Blender rebuilt under it) reads as unreadable, never raises: the summary goes on."""
    if not len(items):
        return ()
    try:
        return tuple(_settings(item, 0) for item in items)
    except Exception as exc:  # a struct rebuilt under it; a string Blender cut inside a character (a hook's bone)
        log.logger.debug("a modifier or constraint could not be read for the change summary: %r", exc)
        return (_UNREADABLE,)


def same(one: Any, other: Any) -> bool:
    """Equal, NaN equal to NaN (`==` says a NaN setting changed at every look): asked only when `!=` said they
    differ."""
    if isinstance(one, tuple) and isinstance(other, tuple):
        return len(one) == len(other) and all(same(a, b) for a, b in zip(one, other, strict=True))
    if isinstance(one, float) and isinstance(other, float):
        return one == other or (math.isnan(one) and math.isnan(other))
    if hasattr(one, "to_tuple") and hasattr(other, "to_tuple"):  # mathutils vectors
        return same(tuple(one), tuple(other))
    if hasattr(one, "row") and hasattr(other, "row"):  # mathutils matrices
        return same(tuple(map(tuple, one)), tuple(map(tuple, other)))
    return bool(one == other)


def _settings(item: Any, depth: int) -> Settings:
    kind = type(item)
    known = _kinds.get(kind)
    if known is None:
        registered = getattr(bpy.types, kind.__name__, None) is kind  # its properties never change
        key = kind if registered else (kind, tuple(item.bl_rna.properties.keys()))
        known = _kinds.get(key)
        if known is None:
            if len(_kinds) >= _KINDS_KEPT:
                _kinds.clear()
            known = _kinds[key] = _kind_of(item)
    read, special, custom = known
    values = list(read(item))
    for index, how in special:
        value = values[index]
        if how == "array":
            values[index] = tuple(value)
        elif isinstance(value, bpy.types.ID):
            values[index] = value.session_uid
        elif value is None or depth >= _DEPTH:
            values[index] = None
        elif how == "list":
            values[index] = tuple(_settings(element, depth + 1) for element in value)
        else:
            values[index] = _settings(value, depth + 1)
    if custom is not None:  # a geometry-nodes modifier's inputs, before Blender 5.2.3
        values.extend((key, _plain(item[key])) for key in item.keys() if key not in custom)
    return (kind.__name__, *values)


def _kind_of(item: Any) -> Kind:
    names: list[str] = []
    special: list[tuple[int, str]] = []
    for prop in item.bl_rna.properties:
        if prop.identifier in _NOT_SETTINGS or prop.identifier.startswith("open_"):
            continue
        if prop.type == "POINTER":
            special.append((len(names), "struct"))
        elif prop.type == "COLLECTION":
            special.append((len(names), "list"))
        elif prop.is_readonly:
            continue  # a status (a cache's "2 frames in memory", a bind's result), not a setting
        elif getattr(prop, "is_array", False) or getattr(prop, "is_enum_flag", False):
            special.append((len(names), "array"))
        names.append(prop.identifier)
    return _reader(names), tuple(special), frozenset(names) if _holds_id_properties(item) else None


def _reader(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """All `names` of a struct in one call (`attrgetter` reads them in C)."""
    if not names:
        return lambda item: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda item: (one(item),)
    return operator.attrgetter(*names)  # type: ignore[return-value]


def _holds_id_properties(item: Any) -> bool:
    try:
        item.keys()
    except TypeError:  # "this type doesn't support IDProperties" (constraints; modifiers from Blender 5.2.3)
        return False
    return True


def _plain(value: Any) -> Any:
    """An ID property's value as something that compares by value."""
    if isinstance(value, bpy.types.ID):
        return value.session_uid
    if hasattr(value, "to_dict"):
        return repr(value.to_dict())
    if hasattr(value, "to_list"):
        value = value.to_list()
    if isinstance(value, (list, tuple)):  # a list of groups holds groups, which compare by identity
        return tuple(map(_plain, value))
    return value
