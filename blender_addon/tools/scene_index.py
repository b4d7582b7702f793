"""What paging a big scene needs between calls, kept until the scene changes.

Counting objects walks Blender's lists (`len()` of a collection is a walk in C: about 0.1 s at a
million objects) and counting them by type walks them all; a page must cost the page. So the counts
are kept with a revision, and the revision moves on with every change the bridge can hear of: Blender's
own handlers (depsgraph updates, undo, redo, a file loaded) and every tool or Lab request that may
change the scene. A page that finds a collection shorter than its kept count (a change nothing
announced) is never answered from the stale counts: the index is rebuilt and the page read again.

The objects pages show are also remembered by name, across changes, so that a detail asked next finds its
object without Blender's walk over every name; each is checked when used (`object_named`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import bpy

from .. import scene_revision

HANDLERS = ("depsgraph_update_post", "undo_post", "redo_post", "load_post")

_kept: dict[tuple[int, int, int], Index] = {}


def _drop() -> None:
    _kept.clear()
    _lists.clear()


@bpy.app.handlers.persistent  # load_post must survive the file it announces
def _changed(*_args: Any) -> None:
    """Blender says the scene may have changed: the revision moves on (and the counts kept for it go)."""
    scene_revision.changed()


def install() -> None:
    """Listen to Blender's change handlers (idempotent)."""
    for name in HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        if _changed not in handlers:
            handlers.append(_changed)


def uninstall() -> None:
    """Stop listening (Blender's handler lists outlive the add-on) and forget everything kept."""
    for name in HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        while _changed in handlers:
            handlers.remove(_changed)
    scene_revision.changed()
    _named.clear()


class Branch:
    """One collection in the depth-first order pages follow: its objects hold offsets [start, start+count)."""

    __slots__ = ("layer_collection", "depth", "start", "count", "end")

    def __init__(self, layer_collection: Any, depth: int, start: int, count: int, end: int) -> None:
        self.layer_collection = layer_collection
        self.depth = depth
        self.start = start
        self.count = count
        self.end = end
        """Where this collection's subtree ends (its own objects, then every child's)."""


class Index:
    """The view layer's tree of collections and counts at one revision, kept while the scene is unchanged."""

    __slots__ = ("revision", "branches", "total", "by_type")

    def __init__(self, revision: int, branches: tuple[Branch, ...], total: int, by_type: dict[str, int]) -> None:
        self.revision = revision
        self.branches = branches
        self.total = total
        self.by_type = by_type


def current(view_layer: Any) -> Index:
    """The index of this view layer at the current revision, built once per revision."""
    install()
    key = (scene_revision.current(), view_layer.as_pointer(), view_layer.layer_collection.collection.as_pointer())
    index = _kept.get(key)
    if index is None:
        index = _kept[key] = _build(view_layer)
    return index


def _build(view_layer: Any) -> Index:
    """The view layer's collections in pre-order (children by name), each with its own objects' span and its
    subtree's end; walked with a list, not recursion: a user's tree may be nested deeper than Python recurses."""
    order: list[tuple[Any, int, int]] = []
    stack = [(view_layer.layer_collection, 0)]
    while stack:
        layer_collection, depth = stack.pop()
        order.append((layer_collection, depth, len(layer_collection.collection.objects)))
        children = sorted(layer_collection.children, key=lambda item: item.name)
        stack.extend((child, depth + 1) for child in reversed(children))
    starts, total = [], 0
    for _, _, count in order:
        starts.append(total)
        total += count
    ends, open_branches = [total] * len(order), []  # a subtree ends where the next branch not below it starts
    for position, (_, depth, _) in enumerate(order):
        while open_branches and order[open_branches[-1]][1] >= depth:
            ends[open_branches.pop()] = starts[position]
        open_branches.append(position)
    branches = [
        Branch(layer_collection, depth, starts[position], count, ends[position])
        for position, (layer_collection, depth, count) in enumerate(order)
    ]
    return Index(scene_revision.current(), tuple(branches), total, _by_type(branches))


TYPE_NAMES = {item.value: item.identifier for item in bpy.types.Object.bl_rna.properties["type"].enum_items}


def _by_type(branches: list[Branch]) -> dict[str, int]:
    """Entries by object type, read in C (`foreach_get`), never object by object in Python."""
    import array

    counts: Counter[int] = Counter()
    for branch in branches:
        objects = branch.layer_collection.collection.objects
        values = array.array("i", bytes(4 * branch.count))
        objects.foreach_get("type", values)
        counts.update(values)
    return {TYPE_NAMES.get(value, str(value)): n for value, n in sorted(counts.items(), key=lambda kv: -kv[1])}


LISTED_FROM = 5_000
"""A collection this big is read into a list once per revision: Blender's slice walks its linked list from the
start (0.17 ms to the end of 10,000 objects, 66 ms to the end of a million), a list index does not. Reading the
list costs a few pages' walks (0.6 ms at 10,000), once after each change."""
_lists: dict[tuple[int, int], list[Any]] = {}


def objects_in(branch: Branch, lo: int, hi: int) -> list[Any]:
    """This collection's objects at page offsets [lo, hi): a slice Blender walks in C, or of the kept list."""
    collection = branch.layer_collection.collection
    if branch.count < LISTED_FROM:
        return list(collection.objects[lo - branch.start : hi - branch.start])
    key = (scene_revision.current(), collection.as_pointer())
    listed = _lists.get(key)
    if listed is None:  # kept until the revision moves on (`changed` empties them all)
        listed = _lists[key] = list(collection.objects)
    try:
        page = listed[lo - branch.start : hi - branch.start]
        for obj in page:
            obj.name  # noqa: B018  (an object freed since: ReferenceError, never a dangling read)
    except ReferenceError:
        raise StaleIndex from None
    return page


def read_page(view_layer: Any, take: Callable[[Index], Any]) -> tuple[Index, Any]:
    """`take(index)` on a current index; when it finds the index stale (StaleIndex), once more on a rebuilt one."""
    index = current(view_layer)
    try:
        return index, take(index)
    except StaleIndex:
        scene_revision.changed()
        index = current(view_layer)
        return index, take(index)


class StaleIndex(Exception):
    """A collection held fewer objects than its kept count: the scene changed without a signal."""


def subtree(index: Index, name: str) -> tuple[Branch, ...]:
    """The branch of the collection named `name` and every branch below it, in page order."""
    for position, branch in enumerate(index.branches):
        if branch.layer_collection.collection.name == name:
            below = [branch]
            for other in index.branches[position + 1 :]:
                if other.depth <= branch.depth:
                    break
                below.append(other)
            return tuple(below)
    raise KeyError(name)


KEPT_NAMES = 10_000
"""Objects remembered by name (those the last pages showed and details found): about 2 MiB; beyond it, the memory
starts over, so it stays flat however many pages are read."""
_named: dict[str, Any] = {}


def remember(name: str, obj: Any) -> None:
    """Keep `obj` findable by `name` without a walk (a page shows it; the model may ask for it next)."""
    if len(_named) >= KEPT_NAMES:
        _named.clear()
    _named[name] = obj


def object_named(name: str) -> Any | None:
    """`bpy.data.objects.get(name)` without Blender's walk over every object (9 ms at 100,000) when the object was
    seen before. Kept across changes, each use checked: Blender keeps one Python object per datablock and marks it
    removed when the datablock is freed (ReferenceError, never a read of freed memory), and a renamed one no longer
    has the name. A local object is the only one with its name; a linked one may share it, so Blender decides."""
    kept = _named.get(name)
    if kept is not None:
        try:
            if kept.name == name and kept.library is None:
                return kept
        except (ReferenceError, UnicodeDecodeError):
            pass
        del _named[name]
    found = bpy.data.objects.get(name)
    if found is not None and found.library is None:
        remember(name, found)
    return found


scene_revision.keeping(_drop)
