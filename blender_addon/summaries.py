"""Change summaries as values: merged over several spans, taken back (`inverse`), told in one line (`said`).

No bpy here: the change record (changes.py) reads Blender and makes summaries; everything done with them once made
lives here, and is tested without Blender.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from .budget import budgeted


class Summary(dict[str, Any]):
    """A change summary: JSON, the words of `changes` in answers. `said` is the same in one line."""


LISTS = (
    "added",
    "removed",
    "renamed",
    "transformed",
    "data_changed",
    "shading_changed",
    "visibility_changed",
    "collections_changed",
    "datablocks_changed",
    "unnamed_changed",
    "materials_given",
    "materials_taken",
)


def unique(values: list[Any]) -> list[Any]:
    """`values` without repeats, first ones first (a rename is a dict: keyed by its text)."""
    seen: dict[Any, Any] = {}
    for value in values:
        seen.setdefault(json.dumps(value, sort_keys=True) if isinstance(value, dict) else value, value)
    return list(seen.values())


FITTED = (*LISTS, "selection")


def fit(summary: Summary) -> Summary:
    """Name lists share the answer budget (a call that adds 100,000 objects names the first ones); `counts` keeps
    each list's whole length when one was cut, and `cut_at_budget` says so."""
    lists = {key: summary[key] for key in FITTED if key in summary}
    kept, cut = budgeted(lists, sized=False)
    if cut:
        whole = summary.get("counts", {})
        summary["counts"] = {key: max(whole.get(key, 0), len(values)) for key, values in lists.items()}
        summary.update(kept)
        summary.update(cut)
    return summary


BOOKKEEPING = ("revision", "changed", "said")
"""The keys every summary has: what changed is in the others."""


def frame_only(summary: Summary) -> bool:
    return "frame_changed" in summary and all(key in (*BOOKKEEPING, "frame_changed") for key in summary)


def nothing(revision: int) -> Summary:
    """The summary of a span that changed nothing, standing at `revision`."""
    empty = Summary(revision={"before": revision, "after": revision}, changed=False)
    empty["said"] = said(empty)
    return empty


def merge(summaries: list[Summary], *, selection: list[str] | None = None) -> Summary:
    """Several summaries (one or more, oldest first) as one net change: from the first's revision to the last's,
    every list joined without repeats, an object added and then removed (or removed and then added back) in neither
    list, counts of objects rather than of mentions, datablock counts summed. `selection`: the selection now, for
    summaries that moved it but cannot say to what (an undo's inverses)."""
    merged = Summary(
        revision={"before": summaries[0]["revision"]["before"], "after": summaries[-1]["revision"]["after"]}
    )
    unseen: Counter[str] = Counter()
    """Per list, names the summaries counted but did not list (cut at their budget): more than any list shows."""
    totals: Counter[str] = Counter()
    orphans: Counter[str] = Counter()
    for summary in summaries:
        counted = summary.get("counts", {})
        unseen.update({key: counted[key] - len(summary[key]) for key in FITTED if key in counted and key in summary})
        _join_additions(merged, summary)
        for key in LISTS:
            if key in summary and key not in ("added", "removed"):
                merged[key] = unique([*merged.get(key, []), *summary[key]])
        totals.update(summary.get("datablocks", {}))
        orphans.update(summary.get("orphans_dropped", {}))
        for key in ("frame_changed", "mode_changed", "active_object"):
            if key in summary:
                merged[key] = {"from": merged.get(key, summary[key])["from"], "to": summary[key]["to"]}
        for path, move in summary.get("scene_changed", {}).items():
            scene = merged.setdefault("scene_changed", {})
            scene[path] = {"from": scene.get(path, move)["from"], "to": move["to"]}
        if "selection" in summary:  # a state, not a tally: the last one's
            merged["selection"] = summary["selection"]
            unseen["selection"] = counted.get("selection", len(summary["selection"])) - len(summary["selection"])
        if "file" in summary:
            merged["file"] = [*merged.get("file", []), *summary["file"]]
        if "unreadable" in summary:
            merged.setdefault("unreadable", summary["unreadable"])
    for key in ("added", "removed"):
        if key in merged and not merged[key]:
            del merged[key]
    for key in ("scene_changed", "active_object"):
        _drop_round_trips(merged, key)
    if selection is not None:
        merged["selection"] = selection
        unseen["selection"] = 0
    if moved := {kind: n for kind, n in totals.items() if n}:
        merged["datablocks"] = moved
    if orphans:
        merged["orphans_dropped"] = dict(orphans)
    merged["changed"] = any(s.get("changed") for s in summaries) and any(k not in BOOKKEEPING for k in merged)
    if any(unseen[key] > 0 for key in FITTED if key in merged):
        merged["counts"] = {key: len(merged[key]) + max(unseen[key], 0) for key in FITTED if key in merged}
    merged["said"] = said(fit(merged))
    return merged


def _join_additions(merged: Summary, summary: Summary) -> None:
    """Fold `summary`'s additions and removals into `merged`'s: a name added by an earlier span and removed by this
    one (or removed earlier and added back now) leaves both lists. Within one span both lists are true as they
    stand (an object removed and another made under its name: both told)."""
    before = {key: set(merged.get(key, [])) for key in ("added", "removed")}
    for key, other in (("removed", "added"), ("added", "removed")):
        names = summary.get(key)
        if not names:
            continue
        back = before[other] & set(names)
        if back:
            merged[other] = [name for name in merged[other] if name not in back]
        merged[key] = unique([*merged.get(key, []), *(name for name in names if name not in back)])


def _drop_round_trips(merged: Summary, key: str) -> None:
    """A move that ended where it began (a setting set back, the active object made active again) is none."""
    if key == "scene_changed":
        if "scene_changed" in merged:
            merged["scene_changed"] = {path: m for path, m in merged["scene_changed"].items() if m["from"] != m["to"]}
            if not merged["scene_changed"]:
                del merged["scene_changed"]
    elif key in merged and merged[key]["from"] == merged[key]["to"]:
        del merged[key]


def inverse(summary: Summary) -> Summary:
    """What taking `summary`'s change back does: additions removed, removals restored, renames reversed."""
    undone = Summary(revision=dict(summary["revision"]))
    swaps = {
        "added": "removed",
        "removed": "added",
        "materials_given": "materials_taken",
        "materials_taken": "materials_given",
    }
    for key in LISTS:
        if key in summary:
            if key == "renamed":
                undone[key] = [{"from": entry["to"], "to": entry["from"]} for entry in reversed(summary[key])]
            else:
                undone[swaps.get(key, key)] = list(summary[key])
    if "datablocks" in summary:
        undone["datablocks"] = {kind: -n for kind, n in summary["datablocks"].items()}
    for key in ("frame_changed", "mode_changed", "active_object"):
        if key in summary:
            undone[key] = {"from": summary[key]["to"], "to": summary[key]["from"]}
    if "scene_changed" in summary:
        undone["scene_changed"] = {
            path: {"from": m["to"], "to": m["from"]} for path, m in summary["scene_changed"].items()
        }
    if "counts" in summary:
        undone["counts"] = {swaps.get(key, key): n for key, n in summary["counts"].items()}
        undone["cut_at_budget"] = True
    if "unreadable" in summary:
        undone["unreadable"] = summary["unreadable"]
    undone["changed"] = bool(summary.get("changed"))
    undone["said"] = said(undone)
    return undone


SAID_NAMES = 3
"""Names a one-line summary shows per list before "and N more"."""


def said(summary: dict[str, Any]) -> str:
    """The summary in one line a person reads at a glance: "added Sphere; removed Light; moved Cube"."""
    parts: list[str] = []
    words = {
        "added": "added",
        "removed": "removed",
        "transformed": "moved",
        "data_changed": "edited the data of",
        "shading_changed": "changed the shading of",
        "visibility_changed": "changed the visibility of",
        "collections_changed": "changed the collections",
        "datablocks_changed": "changed",
        "unnamed_changed": "changed hidden or unused",
    }
    counts = summary.get("counts", {})
    for key, verb, word in (("materials_given", "gave", "material"), ("materials_taken", "took", "material")):
        by_material: dict[str, list[str]] = {}
        for entry in summary.get(key, []):
            by_material.setdefault(entry["material"], []).append(entry["object"])
        for material, objects in by_material.items():
            whole = counts.get(key, len(summary[key])) - len(summary[key]) + len(objects)
            told = f"{verb} {_names(objects, whole)} {word} {material}"
            parts.append(told if verb == "gave" else f"took material {material} from {_names(objects, whole)}")
    for key, verb in words.items():
        names = summary.get(key)
        if names:
            parts.append(f"{verb} {_names(names, counts.get(key, len(names)))}")
    if renamed := summary.get("renamed"):
        listed = [f"{entry['from']} to {entry['to']}" for entry in renamed]
        parts.append("renamed " + _names(listed, counts.get("renamed", len(listed))))
    if moved := summary.get("datablocks"):
        parts.append(
            "datablocks " + ", ".join(f"{kind} {'+' if n > 0 else ''}{n}" for kind, n in sorted(moved.items()))
        )
    if orphans := summary.get("orphans_dropped"):
        dropped = ", ".join(f"{n} {kind}" for kind, n in sorted(orphans.items()))
        parts.append(f"left out unused datablocks ({dropped}: nothing used them, and a saved file keeps none)")
    for key, label in (("active_object", "active object"), ("mode_changed", "mode"), ("frame_changed", "frame")):
        if key in summary:
            parts.append(f"{label} {summary[key]['from']} -> {summary[key]['to']}")
    if scene := summary.get("scene_changed"):
        parts.append("scene " + ", ".join(f"{path} {m['from']} -> {m['to']}" for path, m in scene.items()))
    if "selection" in summary:
        selection = summary["selection"]
        parts.append(f"selection now {_names(selection, counts.get('selection', len(selection))) or 'empty'}")
    for event in summary.get("file", []):
        parts.append(f"file {event['event']}" + (f" ({event['path']})" if event.get("path") else ""))
    if "unreadable" in summary:
        parts.append(f"changed the scene in ways the bridge could not read ({summary['unreadable']})")
    return "; ".join(parts) if parts else "nothing changed"


def _names(names: list[str], whole: int) -> str:
    shown = ", ".join(str(name) for name in names[:SAID_NAMES])
    more = whole - min(len(names), SAID_NAMES)
    return shown + (f" and {more} more" if more > 0 else "")
