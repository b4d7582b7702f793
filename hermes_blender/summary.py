"""Readable text for a person from get_objects_summary's JSON."""

from __future__ import annotations

from typing import Any

from .terminal import one_line


def format_objects_summary(data: dict[str, Any]) -> str:
    root = data.get("collections") or []
    shown = sum(_count(collection) for collection in root)
    total = data.get("total_objects", shown)
    facts = [
        f"active: {one_line(data.get('active_object') or 'none')}",
        f"mode: {one_line(data.get('object_mode') or 'none')}",
    ]
    facts.append(f"camera: {one_line(data.get('camera_object') or 'none')}")
    scene = one_line(data.get("scene_name"))
    lines = [f"Scene '{scene}': {total} object{'s' if total != 1 else ''} ({', '.join(facts)})"]
    if shown < total:
        lines.append(f"showing {shown} from offset {data.get('offset', 0)}; `--arguments '{{\"offset\": N}}'` for more")
    for collection in root:
        lines.append(one_line(collection["name"]))
        lines += _children(collection, "", data.get("active_object"))
    return "\n".join(lines)


def _children(collection: dict[str, Any], indent: str, active: str | None) -> list[str]:
    entries: list[tuple[str, dict[str, Any] | None]] = []
    for obj in collection.get("objects", []):
        entries.append((_object_line(obj, active), None))
    for child in collection.get("children", []):
        flags = " (excluded)" if child.get("exclude") else ""
        entries.append((f"{one_line(child['name'])}/{flags}", child))
    lines: list[str] = []
    for index, (text, child) in enumerate(entries):
        last = index == len(entries) - 1
        lines.append(f"{indent}{'└─' if last else '├─'} {text}")
        if child is not None:
            lines += _children(child, indent + ("   " if last else "│  "), active)
    return lines


def _object_line(obj: dict[str, Any], active: str | None) -> str:
    flags = [
        flag
        for flag, on in (
            ("active", obj["name"] == active),
            ("selected", obj.get("selected")),
            ("hidden", not obj.get("visible", True)),
        )
        if on
    ]
    parent = f", parent {one_line(obj['parent'])}" if obj.get("parent") else ""
    suffix = f" [{', '.join(flags)}]" if flags else ""
    return f"{one_line(obj['name'])} ({one_line(obj.get('type', '?'))}{parent}){suffix}"


def _count(collection: dict[str, Any]) -> int:
    return len(collection.get("objects", [])) + sum(_count(child) for child in collection.get("children", []))
