"""What changed in the scene, told in words: each agent job's change summary, and the user's own edits between jobs.

Blender says what changed through its depsgraph: each evaluation hands `depsgraph_update_post` the datablocks it
updated (an object moved, its data edited, its shading changed, or touched with no flag: renamed), and
`id_type_updated` tells which kinds of datablock were tagged since the last one, including datablocks no scene
uses. So a summary costs what changed: the objects the depsgraph names are looked at one by one, and the whole
object list is read again (in C, `foreach_get` and `keys()`) only when membership may have changed (a collection
or the scene re-evaluated for its contents, or objects tagged that no update names), and so are the collections
(members and settings), to name only those that changed. Blender's own evaluation of
the depsgraph and its undo step cost the whole scene in a background Blender; docs/performance.md has both.

Everything here runs on Blender's main thread: handlers, and the jobs that `begin` and `end` spans.
"""

from __future__ import annotations

import array
import contextlib
import operator
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import bpy

from . import log, scene_revision
from .names import name_of
from .stacks import Settings, same, stack
from .summaries import LISTS, Summary, fit, frame_only, merge, nothing, said, unique

KINDS = {
    "OBJECT": "objects",
    "MESH": "meshes",
    "CURVE": "curves",
    "FONT": "curves",
    "MATERIAL": "materials",
    "TEXTURE": "textures",
    "IMAGE": "images",
    "NODETREE": "node_groups",
    "COLLECTION": "collections",
    "CAMERA": "cameras",
    "LIGHT": "lights",
    "ACTION": "actions",
    "ARMATURE": "armatures",
    "GREASEPENCIL": "grease_pencils",
    "GREASEPENCIL_V3": "grease_pencils",
    "SCENE": "scenes",
    "WORLD": "worlds",
    "LIBRARY": "libraries",
    "SOUND": "sounds",
    "MOVIECLIP": "movieclips",
    "VOLUME": "volumes",
    "TEXT": "texts",
    "PARTICLE": "particles",
    "LATTICE": "lattices",
    "META": "metaballs",
    "SPEAKER": "speakers",
    "LIGHT_PROBE": "lightprobes",
    "CACHEFILE": "cache_files",
    "POINTCLOUD": "pointclouds",
    "CURVES": "hair_curves",
    "KEY": "shape_keys",
    "MASK": "masks",
    "PALETTE": "palettes",
    "LINESTYLE": "linestyles",
}
"""Blender's datablock kinds (`id_type`) by the `bpy.data` collection that holds them: the words summaries use."""
TOLD_TYPES = tuple(
    item.identifier for item in bpy.types.ID.bl_rna.properties["id_type"].enum_items if item.identifier in KINDS
)
"""The kinds (`id_type`) a summary tells of: a window manager, screen, workspace or brush tagged changes no scene."""
COUNTED = tuple(sorted({kind for kind in KINDS.values() if hasattr(bpy.data, kind)}))
GEOMETRY = frozenset({"MESH", "CURVE", "FONT", "META", "CURVES", "POINTCLOUD", "VOLUME", "GREASEPENCIL_V3"})
"""Kinds of an object's data whose update for shading alone is the material's doing, not an edit of theirs."""
STRUCTURE = ("Collection", "Scene")
"""Datablocks re-evaluated for their contents when objects join or leave them (or are hidden)."""


Pose = tuple[Any, str, int, Any, tuple[Settings, ...], int, tuple[Settings, ...]]
"""Where an object is and what it is made of, in two parts. Where: its matrix_basis and rotation mode, its parent's
session uid (0: none) and parent inverse matrix, its constraints' settings. Made of: its data's session uid (0: none)
and its modifiers' settings. The matrices are copies (mathutils compares them in C: a fifth of the time tuples of
their floats take)."""
PLACE = 5
"""The first PLACE items of a Pose say where the object is; the rest what it is made of."""


class Objects:
    """The objects at one moment, read in C: names and hidden flags by session uid (unique while Blender runs), and
    the pose of each object the depsgraph does not evaluate (hidden in the viewport, in a hidden or excluded
    collection, in no scene of the view layer, and needed by no object that is evaluated): Blender names no update of
    theirs, so only a comparison tells that one moved."""

    __slots__ = ("by_uid", "unseen", "unseen_in_layer", "unseen_uses")

    def __init__(
        self,
        by_uid: dict[int, tuple[str, bool, bool]],
        unseen: dict[int, tuple[Any, Pose]] | None = None,
        unseen_in_layer: int = 0,
        unseen_uses: frozenset[str] = frozenset(),
    ) -> None:
        self.by_uid = by_uid
        self.unseen = unseen if unseen is not None else {}
        self.unseen_in_layer = unseen_in_layer
        """How many of `unseen` are in the view layer's objects (those Blender evaluates are the rest)."""
        self.unseen_uses = unseen_uses
        """The kinds (`id_type`) of what `unseen` objects are made of: their data, and LOOKS when one has a
        material or is a light."""

    @classmethod
    def read(cls) -> Objects:
        objects = bpy.data.objects
        count = len(objects)
        uids = array.array("I", bytes(4 * count))
        objects.foreach_get("session_uid", uids)
        hidden = array.array("b", bytes(count))
        objects.foreach_get("hide_viewport", hidden)
        unrendered = array.array("b", bytes(count))
        objects.foreach_get("hide_render", unrendered)
        names = object_names()
        by_uid = dict(zip(uids, zip(names, map(bool, hidden), map(bool, unrendered), strict=True), strict=True))
        view_layer = bpy.context.view_layer
        layer_objects = view_layer.objects if view_layer is not None else ()
        hidden_collections = [c for c in bpy.data.collections if c.hide_viewport]
        if len(layer_objects) == count and not hidden.count(1) and not hidden_collections:
            return cls(by_uid)  # most scenes: every object evaluated, no set built, no walk of the objects
        in_layer = set(array.array("I", _uids(layer_objects))) if view_layer is not None else set()
        shown = set(in_layer)
        for collection in hidden_collections:
            shown.difference_update(array.array("I", _uids(collection.all_objects)))
        left_out = {uid for uid, hide in zip(uids, hidden, strict=True) if hide or uid not in shown}
        depsgraph = view_layer.depsgraph if view_layer is not None else None
        unseen = {
            obj.session_uid: (obj, _pose(obj))
            for obj in bpy.data.objects
            if obj.session_uid in left_out and not (depsgraph and obj.evaluated_get(depsgraph).is_evaluated)
        }  # a hidden object another one needs (a boolean's cutter, a parent) is evaluated: the depsgraph names it
        uses: set[str] = set()
        for obj, _ in unseen.values():
            if obj.data is not None:
                uses.add(obj.data.id_type)
            if obj.particle_systems:
                uses.add("PARTICLE")
            if obj.type == "LIGHT" or any(slot.material for slot in obj.material_slots):
                uses.update(LOOKS)
        return cls(by_uid, unseen, len(unseen.keys() & in_layer), frozenset(uses))


def _pose(obj: Any) -> Pose:
    parent, data = obj.parent, obj.data
    return (
        obj.matrix_basis.copy(),
        obj.rotation_mode,
        parent.session_uid if parent is not None else 0,
        obj.matrix_parent_inverse.copy(),
        stack(obj.constraints),
        data.session_uid if data is not None else 0,
        stack(obj.modifiers),
    )


def _uids(datablocks: Any) -> bytes:
    """The session uids of a collection of datablocks, in its order, read in C."""
    uids = array.array("I", bytes(4 * len(datablocks)))
    datablocks.foreach_get("session_uid", uids)
    return uids.tobytes()


class Members:
    """Each collection at one moment: its members (objects and child collections by session uid, in link order) and
    its settings (hidden, unselectable, instance offset, and in the active view layer excluded or hidden), the scenes'
    own top collections included. Blender re-evaluates every collection when anything in the view layer is added,
    removed or hidden, so only a comparison says which collections changed."""

    __slots__ = ("by_uid", "tops", "layers")

    def __init__(
        self,
        by_uid: dict[int, tuple[str, bytes, bytes, tuple[Any, ...]]],
        tops: frozenset[int] = frozenset(),
        layers: LayerTree | None = None,
    ) -> None:
        self.by_uid = by_uid
        self.tops = tops
        """The scenes' top collections: named after their scene, so a scene's rename is no rename of theirs."""
        self.layers: LayerTree = layers if layers is not None else (None, {})
        """`_layer_tree()` as read with them: the layer collections' flags change with the scene alone."""

    @classmethod
    def read(cls) -> Members:
        tree = _layer_tree()
        layers = tree[1]
        active = bpy.context.scene
        named = [(c, name_of(c)) for c in bpy.data.collections]
        for scene in bpy.data.scenes:  # each scene's top collection is "Scene Collection": others by their scene
            top = name_of(scene.collection)
            named.append((scene.collection, top if scene == active else f"{top} ({name_of(scene)})"))
        return cls(
            {
                c.session_uid: (
                    name,
                    _uids(c.objects),
                    _uids(c.children),
                    (
                        c.hide_viewport,
                        c.hide_render,
                        c.hide_select,
                        tuple(c.instance_offset),
                        frozenset(layers.get(c.session_uid, ())),
                    ),
                )
                for c, name in named
            },
            frozenset(scene.collection.session_uid for scene in bpy.data.scenes),
            tree,
        )

    def changed_in(self, now: Members) -> list[str]:
        """The collections of `now` whose name, members or settings differ from these (a new one when it has
        members), by name."""
        names = []
        same_layer = self.layers[0] == now.layers[0]  # else the window shows another view layer: not a change
        for uid, (name, objects, children, settings) in now.by_uid.items():
            old = self.by_uid.get(uid)
            if old is None:
                moved = bool(objects or children)
            else:  # the bytes differ when only the order moved (unlinked, linked again): sets decide then
                moved = (
                    (old[0] != name and uid not in now.tops)
                    or (old[3] if same_layer else old[3][:LAYER]) != (settings if same_layer else settings[:LAYER])
                    or (
                        (old[1], old[2]) != (objects, children)
                        and (_as_set(old[1]) != _as_set(objects) or _as_set(old[2]) != _as_set(children))
                    )
                )
            if moved:
                names.append(name)
        return sorted(names)


LAYER = 4
"""Where a collection's settings (`Members`) hold its flags in the view layer."""
LayerFlags = dict[int, set[tuple[bool, bool]]]
ViewLayerKey = tuple[int, int] | None
"""Which view layer a reading is of: its scene's session uid and its address (a view layer is no datablock: it has
no uid, and its name is the user's to swap with another's; None: no view layer)."""
LayerTree = tuple[ViewLayerKey, LayerFlags]


def _view_layer_key() -> ViewLayerKey:
    scene, view_layer = bpy.context.scene, bpy.context.view_layer
    return (scene.session_uid, view_layer.as_pointer()) if scene is not None and view_layer is not None else None


def _layer_tree() -> LayerTree:
    """Each collection's (excluded, hidden) pairs in the active view layer's tree, by its session uid: the pairs its
    places have, so a collection nested in a second parent as it is in the first has changed nothing."""
    flags: LayerFlags = {}
    if bpy.context.view_layer is not None:
        _layer_flags(bpy.context.view_layer.layer_collection, flags)
    return _view_layer_key(), flags


def _layer_flags(layer: Any, flags: LayerFlags) -> None:
    """Walked with a list, not recursion: a user's tree may be nested deeper than Python recurses."""
    stack = [layer]
    while stack:
        layer = stack.pop()
        flags.setdefault(layer.collection.session_uid, set()).add((layer.exclude, layer.hide_viewport))
        stack.extend(layer.children)


def _hidden_in_layer() -> tuple[ViewLayerKey, frozenset[int]]:
    """The session uids of the objects hidden in the active view layer (`hide_set`, H in the viewport): a flag of
    the view layer, not of the object, so Blender updates only the scene for it. Only objects it does not show can
    be hidden so, and `hide_get` is asked of those alone (35 ms at 100,000 objects: two walks in C, one in Python)."""
    view_layer = bpy.context.view_layer
    if view_layer is None:
        return None, frozenset()
    unshown = set(view_layer.objects).difference(bpy.context.visible_objects)
    return _view_layer_key(), frozenset(obj.session_uid for obj in unshown if obj.hide_get())


def _as_set(uids: bytes) -> set[int]:
    return set(array.array("I", uids))


def object_names() -> list[str]:
    """Every object's name, in `bpy.data.objects` order: read in C (`keys()`); one that is not valid UTF-8 in the
    .blend makes that read fail, and then each is read alone (`name_of` mends it)."""
    try:
        return bpy.data.objects.keys()
    except (UnicodeDecodeError, SystemError):  # bpy raises the decode error as a SystemError from `keys()`
        return [name_of(obj) for obj in bpy.data.objects]


def counts(kinds: Iterable[str] = COUNTED) -> dict[str, int]:
    """Datablocks of these kinds (`len` walks each list in C)."""
    return {kind: len(getattr(bpy.data, kind)) for kind in kinds}


SCENE_SETTINGS = (
    "camera",
    "world",
    "frame_start",
    "frame_end",
    "render.engine",
    "render.resolution_x",
    "render.resolution_y",
    "render.resolution_percentage",
    "render.fps",
    "render.film_transparent",
)
"""The active scene's settings a summary tells when they move (`scene_changed`): what an agent is asked to set up
for a render. Blender re-evaluates the scene for each, but its depsgraph never says which moved."""


_read_settings = operator.attrgetter(*SCENE_SETTINGS)


def scene_settings() -> tuple[Any, ...]:
    """SCENE_SETTINGS' values now (a datablock as its session uid and name: renaming the camera is no new camera);
    empty without a scene."""
    scene = bpy.context.scene
    if scene is None:
        return ()
    return tuple(
        (value.session_uid, name_of(value)) if isinstance(value, bpy.types.ID) else value
        for value in _read_settings(scene)
    )


def _same(was: Any, value: Any) -> bool:
    return was[0] == value[0] if isinstance(was, tuple) and isinstance(value, tuple) else was == value


def _shown(value: Any) -> Any:
    return value[1] if isinstance(value, tuple) else value


class Moment:
    """What is cheap to read at any time and worth telling when it moves."""

    __slots__ = ("revision", "frame", "mode", "active", "file", "settings")

    def __init__(
        self, revision: int, frame: int, mode: str, active: str | None, file: str, settings: tuple[Any, ...] = ()
    ) -> None:
        self.revision = revision
        self.frame = frame
        self.mode = mode
        self.active = active
        self.file = file
        self.settings = settings
        """`scene_settings()`."""

    @classmethod
    def now(cls, settings: tuple[Any, ...] | None = None) -> Moment:
        """`settings`: known not to have moved (Blender did not re-evaluate the scene), so not read again."""
        context = bpy.context
        active = context.view_layer.objects.active if context.view_layer is not None else None
        return cls(
            revision=scene_revision.current(),
            frame=context.scene.frame_current if context.scene is not None else 0,
            mode=context.mode,
            active=name_of(active) if active is not None else None,
            file=bpy.data.filepath,
            settings=scene_settings() if settings is None else settings,
        )

    def but(self, **read_anew: Any) -> Moment:
        """The same moment with the fields in `read_anew` (name: value) read anew."""
        return Moment(**{**{name: getattr(self, name) for name in Moment.__slots__}, **read_anew})

    def settings_moved(self, now: tuple[Any, ...]) -> dict[str, dict[str, Any]]:
        """Each of SCENE_SETTINGS that differs in `now`: from, to (nothing when either has no scene)."""
        if not (self.settings and now):
            return {}
        pairs = zip(SCENE_SETTINGS, self.settings, now, strict=True)
        return {path: {"from": _shown(was), "to": _shown(value)} for path, was, value in pairs if not _same(was, value)}


class Touched:
    """What the depsgraph named during one span (a job, or the user's edits between jobs)."""

    __slots__ = ("objects", "others", "kinds", "structure", "scene", "files")

    def __init__(self) -> None:
        self.objects: dict[int, tuple[Any, set[str]]] = {}
        """Session uid: the object, and how it changed (transform, data, shading, touched)."""
        self.others: dict[str, set[str]] = {}
        """Other datablocks updated, by kind: their names."""
        self.kinds: set[str] = set()
        """Kinds (`id_type`) tagged or updated."""
        self.structure = False
        """A collection or the scene was re-evaluated: membership or visibility may have moved."""
        self.scene = False
        """The scene itself was updated (selection, active object, view layer)."""
        self.files: list[dict[str, str]] = []
        """Files saved, opened or reverted, in order."""

    def take(self, depsgraph: Any) -> None:
        """Fold one evaluation's updates in (from `depsgraph_update_post`, before Blender clears its tags)."""
        for update in depsgraph.updates:
            datablock = update.id
            kind = datablock.id_type
            self.kinds.add(kind)
            if kind == "OBJECT":
                how = {
                    word
                    for word, flag in (
                        ("transform", update.is_updated_transform),
                        ("data", update.is_updated_geometry),
                        ("shading", update.is_updated_shading),
                    )
                    if flag
                } or {"touched"}
                original = datablock.original
                uid = original.session_uid
                previous = self.objects.get(uid)
                self.objects[uid] = (original, how | (previous[1] if previous else set()))
            elif kind in GEOMETRY and update.is_updated_shading and not update.is_updated_geometry:
                continue  # re-shaded for a material its objects wear: told as their shading and the material
            elif not datablock.original.is_embedded_data:  # a material's own node tree is told as the material
                if type(datablock).__name__ in STRUCTURE and update.is_updated_geometry:
                    self.structure = True
                if kind == "SCENE":
                    self.scene = True
                self.others.setdefault(KINDS.get(kind, kind.lower()), set()).add(name_of(datablock.original))
        self.tagged(depsgraph)

    def tagged(self, depsgraph: Any) -> None:
        """Kinds Blender tagged that no update may name (datablocks no scene uses)."""
        updated = depsgraph.id_type_updated
        self.kinds.update(kind for kind in TOLD_TYPES if updated(kind))

    def empty(self) -> bool:
        return not (self.objects or self.others or self.kinds or self.files)


class Scene:
    """The scene's change record, fed by Blender's handlers while installed: spans of agent jobs and of what
    happened between them (the user's edits in the GUI), closed into the journal that `since` reads.

    A job is a span: `begin` closes the span before it, `end` closes the job's and answers its summary.
    """

    def __init__(self, *, between: str = "user", journal_size: int = 256) -> None:
        self._between = between
        """Whose the changes between jobs are: the user's in the GUI; a background Blender has no user."""
        self._objects = Objects({})
        self._members = Members({})
        self._counts: dict[str, int] = {}
        self._materials: dict[int, int] = {}
        """Each material's users by session uid, as last read: one not there was made since, one whose users moved
        was given or taken."""
        self._orphans: dict[str, int] = {}
        """Unused datablocks by kind when a file load began: a saved file never holds them, so a load drops them."""
        """The materials' session uids as last read: one not among them was made since."""
        self._moment = Moment(0, 0, "", None, "")
        self._selected: tuple[str, ...] | None = None
        self._layer_hidden: tuple[ViewLayerKey, frozenset[int]] = (None, frozenset())
        self._span = Touched()
        self._in_job = False
        self._replaced: list[Summary] = []
        """Summaries of file loads and undo steps inside the running job, told with its own."""
        self._saving_copy = False
        self.journal: list[Entry] = []
        self.journal_size = journal_size
        self.loads = 0
        self.foreign_steps = 0
        """Undo or redo run by a job's code itself: it ends the agent's history as a file load does."""
        self._moving_history = False
        """Files loaded (opened, reverted, restored) since install: a load ends the agent's history."""
        self._load_word: str | None = None
        self._path_before_load = ""
        self.known_from = 0
        """The oldest revision `since` can answer from."""
        self.on_record: Callable[[str, Summary], None] = lambda author, summary: None
        """Told each change kept in the journal, with its author (resource subscriptions hear of it so)."""
        self.on_saved: Callable[[str], None] = lambda path: None
        """Told the path of each save of the open file (not a checkpoint's copy): checkpoints hear of it so."""
        self._handlers = {
            "depsgraph_update_post": self._persistent(self._evaluated),
            "frame_change_pre": self._persistent(self._frame_changing),
            "load_pre": self._persistent(self._loading),
            "load_post": self._persistent(self._loaded),
            "load_post_fail": self._persistent(self._load_failed),
            "save_post": self._persistent(self._saved),
            "undo_post": self._persistent(self._stepped),
            "redo_post": self._persistent(self._stepped),
        }
        self._handlers = {name: h for name, h in self._handlers.items() if hasattr(bpy.app.handlers, name)}
        """Those this Blender has (`load_post_fail` is not on every line)."""

    @staticmethod
    def _persistent(method: Callable[..., None]) -> Callable[..., None]:
        """A handler that survives the file it announces (a bound method cannot be marked persistent)."""
        return bpy.app.handlers.persistent(lambda *args: method(*args))

    def install(self) -> None:
        for name, handler in self._handlers.items():
            handlers = getattr(bpy.app.handlers, name)
            if handler not in handlers:
                handlers.append(handler)
        self._read_afresh()
        self.known_from = self._moment.revision

    def _reinstall(self) -> None:
        missing = [name for name, handler in self._handlers.items() if handler not in getattr(bpy.app.handlers, name)]
        if missing:
            log.logger.warning("Blender's %s handlers were removed (by agent code?); put back", ", ".join(missing))
            for name in missing:
                getattr(bpy.app.handlers, name).append(self._handlers[name])

    def uninstall(self) -> None:
        for name, handler in self._handlers.items():
            handlers = getattr(bpy.app.handlers, name)
            while handler in handlers:
                handlers.remove(handler)

    def _read_afresh(self) -> None:
        """Read the scene whole (in C): at install, and after a file load or an undo replaced every datablock."""
        _evaluate()  # tags pending now are no one's change
        read = (
            Objects.read(),
            Members.read(),
            counts(),
            Moment.now(),
            _selected(),
            _hidden_in_layer(),
            _material_users(),
        )
        self._span = Touched()  # all or nothing: a read that failed leaves the last reading whole
        (
            self._objects,
            self._members,
            self._counts,
            self._moment,
            self._selected,
            self._layer_hidden,
            self._materials,
        ) = read

    # Handlers ---------------------------------------------------------------------------------

    def _evaluated(self, _scene: Any, depsgraph: Any) -> None:
        self._span.take(depsgraph)

    def _frame_changing(self, *_args: Any) -> None:
        """The second witness: a frame change (`frame_set` in agent code, playback, a scrub) evaluates the tags
        pending since the last evaluation and clears them without calling `depsgraph_update_post`, so the edits
        made before it would be nobody's. They are evaluated first, through the path that tells. Nothing pending
        (playback): nothing done. A render's frame change runs on its own thread with a depsgraph of its own."""
        view_layer = bpy.context.view_layer
        if view_layer is None or threading.current_thread() is not threading.main_thread():
            return
        depsgraph = view_layer.depsgraph
        if depsgraph is not None and any(map(depsgraph.id_type_updated, TOLD_TYPES)):
            depsgraph.update()

    def _loading(self, *_args: Any) -> None:
        self._path_before_load = bpy.data.filepath
        self._orphans = _orphans()

    def _loaded(self, *_args: Any) -> None:
        self.loads += 1
        path = bpy.data.filepath
        verb = "reverted" if self._path_before_load and self._path_before_load == path else "opened"
        word, self._load_word = self._load_word or verb, None
        self._replaced_by({"event": word, "path": path})

    def _load_failed(self, *_args: Any) -> None:
        self._orphans = {}  # nothing was loaded: what was unused then says nothing about the next load

    def expect_load(self, word: str) -> None:
        """The job is about to load a file for a reason of its own (a checkpoint restored): tell it so."""
        self._load_word = word

    def _saved(self, *_args: Any) -> None:
        if not self._saving_copy:
            self._span.files.append({"event": "saved", "path": bpy.data.filepath})
            self.on_saved(bpy.data.filepath)

    def _stepped(self, *_args: Any) -> None:
        if self._moving_history:
            return  # the agent's own undo or redo: its tool tells what it took back, then calls `replaced`
        if self._in_job:
            self.foreign_steps += 1  # the job's code ran undo or redo itself: the agent's history no longer holds
        self._replaced_by({"event": "undo history moved (undo or redo)", "path": bpy.data.filepath})

    def moving_history(self, moving: bool) -> None:
        """The agent's history is moving Blender's (undo_agent_steps): not a change of its own."""
        self._moving_history = moving

    def _replaced_by(self, event: dict[str, str]) -> None:
        """Every datablock was replaced: the span is closed by names and counts, then everything read afresh."""
        before = {name for name, _, _ in self._objects.by_uid.values()}
        after = set(object_names())
        old_counts = self._counts
        self._counts = counts()
        span = self._take_span()
        span.files.append(event)
        summary = self._summary(span, whole={"added": sorted(after - before), "removed": sorted(before - after)})
        moved = {kind: n - old_counts.get(kind, n) for kind, n in self._counts.items() if n != old_counts.get(kind, n)}
        orphans, self._orphans = {k: min(-n, self._orphans.get(k, 0)) for k, n in moved.items() if n < 0}, {}
        if orphans := {kind: n for kind, n in orphans.items() if n}:  # a .blend keeps no unused datablock
            summary["orphans_dropped"] = orphans
            moved = {kind: n + orphans.get(kind, 0) for kind, n in moved.items() if n + orphans.get(kind, 0)}
        if moved:
            summary["datablocks"] = moved
        if moved or orphans:
            summary.update(changed=True, said=said(summary))
        self._span = Touched()
        if self._in_job:
            self._replaced.append(summary)
        else:
            self._record(self._between, summary)
        self._read_afresh()

    def replaced(self) -> None:
        """The agent's own undo or redo replaced every datablock: read afresh, nothing recorded."""
        self._read_afresh()

    # Spans ------------------------------------------------------------------------------------

    def begin(self) -> None:
        """An agent job starts: what happened since the last one is closed first, as not the agent's. Handlers
        agent code removed are put back (and the log says so): without them nothing would be told."""
        self._reinstall()
        self.settle()
        self._in_job = True
        self._replaced = []

    def end(self, author: str) -> Summary:
        """The job ended: its summary, also kept in the journal as `author`'s. One that cannot be read (a fault of
        this module's, or a datablock Blender will not let it read) says so and counts as a change: the call keeps
        its answer and its undo step, and the scene is read afresh for the next span."""
        try:
            self._reinstall()  # agent code that removed the handlers in this job: its own changes are still told
            try:
                _evaluate()
                if self._span.empty() and not self._replaced and self._moment.frame == _frame():
                    return nothing(scene_revision.current())  # most calls: nothing to compare, nothing to keep
                summary = self._summary(self._take_span(), unnamed=True)
                if self._replaced:
                    summary = merge([*self._replaced, summary])
            except Exception as exc:
                summary = self._unreadable(exc)
            self._record(author, summary)
            return summary
        finally:
            self._in_job = False
            self._replaced = []
            self._load_word = None  # a load the job expected and never made says nothing about the next one

    def _unreadable(self, exc: Exception) -> Summary:
        log.logger.warning("the change summary could not be read; the call counts as a change", exc_info=exc)
        before = self._moment.revision
        scene_revision.changed()
        try:
            self._read_afresh()
        except Exception:  # the next span fails the same way and says so again: each such call stays a step
            self._span = Touched()
            self._moment = self._moment.but(revision=scene_revision.current())
        summary = Summary(
            revision={"before": before, "after": self._moment.revision},
            unreadable=f"{type(exc).__name__}: {exc}",
            changed=True,
        )
        summary["said"] = said(summary)
        return summary

    def settle(self) -> None:
        """Close the open span between jobs (the user's edits so far), so a reader or a job after it sees them."""
        if self._in_job:
            return
        try:
            _evaluate()
            if self._span.empty() and self._moment.frame == _frame():
                self._follow_view_layer()
                return
            summary = self._summary(self._take_span())
        except Exception as exc:  # as in `end`: told as unreadable, and the agent's undo refuses over it
            summary = self._unreadable(exc)
        self._record(self._between, summary)

    def _follow_view_layer(self) -> None:
        """The window shows another view layer or scene since the span's readings: its hides, eyes, selection and
                active object are the readings from now on, not a change (one made in the same span as the switch goes
                untold). Asked when the span between calls closes with nothing in it (a switch updates nothing Blender tells), so
        before every call and every reading of the record."""
        key = _view_layer_key()
        if key != self._members.layers[0]:
            self._members = Members.read()
        if key != self._layer_hidden[0]:
            self._layer_hidden = _hidden_in_layer()
            self._selected = _selected()
            self._moment = self._moment.but(active=Moment.now(self._moment.settings).active)

    def _take_span(self) -> Touched:
        span, self._span = self._span, Touched()
        return span

    @contextlib.contextmanager
    def unrecorded(self) -> Iterator[None]:
        """Changes a tool makes and takes back inside (a montage's camera) are nobody's: the open span is closed
        first (between jobs) or kept (inside a job: the job's own changes stay its own), what the depsgraph names
        inside is dropped, and the scene's revision is what it was."""
        self.settle()
        _evaluate()  # the open span's pending tags stay its own
        kept, self._span = self._span, Touched()
        revision = scene_revision.current()
        try:
            yield
        finally:
            _evaluate()
            self._span = kept
            scene_revision.restore(revision)

    def copying(self, saving: bool) -> None:
        """A checkpoint is being written (`save_as_mainfile(copy=True)`): not a save of the user's file."""
        self._saving_copy = saving

    def note(self, author: str, summary: Summary) -> None:
        """Keep a summary told by a tool (the agent's undo, whose own reload says nothing by uid): the revision
        moves on, and the summary spans from the last closed moment to it."""
        before = self._moment.revision
        scene_revision.changed()
        self._moment = Moment.now()
        summary["revision"] = {"before": before, "after": self._moment.revision}
        self._record(author, summary)

    def _record(self, author: str, summary: Summary) -> None:
        if not summary["changed"]:
            return
        last = self.journal[-1] if self.journal else None
        if last is not None and last.author == author and frame_only(summary) and frame_only(last.summary):
            # playback or scrubbing is one change however many frames it passes: the record keeps the rest
            self.journal[-1] = Entry(author, time.time(), merge([last.summary, summary]))
        else:
            self.journal.append(Entry(author, time.time(), summary))
            if len(self.journal) > self.journal_size:
                self.known_from = self.journal.pop(0).summary["revision"]["after"]
        self.on_record(author, summary)

    def since(self, revision: int) -> Summary | None:
        """Everything recorded after `revision`, or None when the journal no longer reaches back that far."""
        self.settle()
        if revision < self.known_from:
            return None
        told = [entry.summary for entry in self.journal if entry.summary["revision"]["after"] > revision]
        return merge(told) if told else nothing(scene_revision.current())

    def entries_after(self, revision: int, author: str) -> list[Entry] | None:
        """The journal's entries of `author` after `revision`, the open span closed first; None when the journal no
        longer reaches back that far."""
        self.settle()
        if revision < self.known_from:
            return None
        return [e for e in self.journal if e.author == author and e.summary["revision"]["after"] > revision]

    @property
    def revision(self) -> int:
        return self._moment.revision

    @property
    def selection(self) -> list[str]:
        """The selected objects' names as last read (after a file load or an undo, read afresh)."""
        return list(self._selected or ())

    # The summary ------------------------------------------------------------------------------

    def _summary(self, span: Touched, whole: dict[str, list[str]] | None = None, *, unnamed: bool = False) -> Summary:
        """What `span` changed, from the last closed moment to now. `whole`: additions and removals found by
        comparing names (every datablock was replaced, so uids say nothing). `unnamed`: an agent's job, whose
        edits inside objects the depsgraph leaves out are told by kind (`_unnamed`; between jobs the bridge's own
        reads tag datablocks they make and remove, and the GUI's undo mark catches a person's such edit)."""
        before = self._moment
        shown = _view_layer_key() == self._layer_hidden[0]  # else another view layer's active object is no move
        frame_moved = before.frame != _frame()
        if not span.empty() or frame_moved:
            scene_revision.changed()  # a frame change is a change (animated objects move) the depsgraph never names
        # each setting tags the scene when set; a driver moves one with the frame; a load replaces them all
        reread = span.scene or whole is not None or frame_moved
        after = self._moment = Moment.now(None if reread else before.settings)
        lists: dict[str, list[Any]] = {key: [] for key in LISTS}
        if whole is not None:
            lists["added"].extend(whole["added"])
            lists["removed"].extend(whole["removed"])
        moved = self._recount(span) if whole is None else {}
        reshaded: list[str] = []
        made: set[str] = set()
        if whole is None:
            known = self._objects.by_uid
            # a layer collection's eye (its hide_viewport) updates the scene alone
            tree = _layer_tree() if span.scene else None
            layers_moved = tree is not None and tree[0] == self._members.layers[0] and tree != self._members.layers
            regrouped = span.structure or "COLLECTION" in span.kinds or layers_moved
            reshaded = self._objects_changed(span, lists, regrouped=regrouped or "objects" in moved)
            made, worn_anew = self._materials_moved(span)
            if lists["shading_changed"] and worn_anew and _only_materials_looked(span):
                lists["shading_changed"] = _wearing(span, lists["shading_changed"], span.others["materials"])
            if regrouped:
                members = Members.read()
                lists["collections_changed"].extend(self._members.changed_in(members))
                self._members = members
            if span.scene:
                lists["visibility_changed"].extend(self._hidden_or_shown_in_layer(known))
        for kind, names in sorted(span.others.items()):
            if kind not in ("collections", "scenes", "objects"):
                lists["datablocks_changed"].extend(f"{kind}/{name}" for name in sorted(names))
        if whole is None and made:
            lists["materials_given"].extend(_materials_given(span, lists, made))

        summary = Summary(revision={"before": before.revision, "after": after.revision})
        for key in LISTS:
            if lists[key]:
                summary[key] = unique(lists[key])
        if moved:
            summary["datablocks"] = moved
        for name, key in (("frame", "frame_changed"), ("mode", "mode_changed"), ("active", "active_object")):
            was, now = getattr(before, name), getattr(after, name)
            if was != now and (shown or name != "active"):
                summary[key] = {"from": was, "to": now}
        if settings := before.settings_moved(after.settings):
            summary["scene_changed"] = settings
        if span.scene:
            selected = _selected()
            if selected != self._selected:
                summary["selection"] = list(selected)
                self._selected = selected
        if span.files:
            summary["file"] = span.files
        if unnamed and whole is None and (kinds := _unnamed(span, summary, self._objects.unseen_uses)):
            summary["unnamed_changed"] = kinds
        if reshaded and len(summary) == 1:  # nothing else moved: the look did (every object's colour), a step
            summary["shading_changed"] = reshaded
        summary["changed"] = len(summary) > 1
        summary["said"] = said(fit(summary))
        return summary

    def _materials_moved(self, span: Touched) -> tuple[set[str], bool]:
        """The materials the span made (by name), and whether any was made, given or taken (its users moved): read
        only when Blender tagged materials (a walk of the materials alone)."""
        if "MATERIAL" not in span.kinds:
            return set(), False
        before, self._materials = self._materials, _material_users()
        made = set()
        for name in span.others.get("materials", ()):
            material = bpy.data.materials.get(name)
            if material is not None and material.session_uid not in before:
                made.add(name)
        return made, bool(made) or any(before.get(uid, users) != users for uid, users in self._materials.items())

    def _objects_changed(self, span: Touched, lists: dict[str, list[Any]], *, regrouped: bool) -> list[str]:
        """Fill `lists` with what the depsgraph named of known objects and what moved of those it leaves out (and
        additions, removals, visibility when objects joined, left or changed collections: `regrouped`); answer the
        objects whose shading went untold because Blender re-shaded them all for a rebuild of its relations
        (`_everything_reshaded`)."""
        known = self._objects.by_uid
        rebuilt = not span.structure and _everything_reshaded(span, self._objects.unseen_in_layer)
        untold: list[str] = []
        if "OBJECT" in span.kinds:
            self._unseen_changed(lists)
        for uid, (obj, how) in span.objects.items():
            try:
                name = name_of(obj)
            except ReferenceError:  # freed since the evaluation that named it: told as removed below
                continue
            old = known.get(uid)
            if old is None:
                continue  # new: told below with the other additions
            if old[0] != name:
                lists["renamed"].append({"from": old[0], "to": name})
                known[uid] = (name, old[1], old[2])
            for word, key in (("transform", "transformed"), ("data", "data_changed"), ("shading", "shading_changed")):
                if word not in how or (word == "shading" and span.structure):
                    continue  # objects joined, left or hid: Blender re-shaded every object
                (untold if word == "shading" and rebuilt else lists[key]).append(name)
        if not regrouped:
            return untold  # membership cannot have moved: no walk over the objects
        now = Objects.read()
        lists["added"].extend(sorted(now.by_uid[uid][0] for uid in now.by_uid.keys() - known.keys()))
        lists["removed"].extend(sorted(known[uid][0] for uid in known.keys() - now.by_uid.keys()))
        for uid, (name, hidden, unrendered) in now.by_uid.items():
            old = known.get(uid)
            if old is not None and (old[1], old[2]) != (hidden, unrendered):
                lists["visibility_changed"].append(name)
        self._objects = now
        return untold

    def _hidden_or_shown_in_layer(self, known: dict[int, Any]) -> list[str]:
        """The objects hidden or shown in the view layer since it was last read, by name: of those `known` before
        and still there (one added or removed is told as that)."""
        (layer, hidden), (was_layer, was) = _hidden_in_layer(), self._layer_hidden
        self._layer_hidden = (layer, hidden)
        if layer != was_layer:
            return []  # the window shows another view layer or scene: nothing in it changed
        flipped = hidden.symmetric_difference(was) & known.keys() & self._objects.by_uid.keys()
        return sorted(self._objects.by_uid[uid][0] for uid in flipped)

    def _unseen_changed(self, lists: dict[str, list[Any]]) -> None:
        """Fill `lists` with the objects the depsgraph leaves out that were renamed, moved (re-parented, constrained)
        or given other data or modifiers since their poses were read; their poses move on. A removed one is told with the other removals."""
        known = self._objects.by_uid
        for uid, (obj, pose) in self._objects.unseen.items():
            try:
                name, now = name_of(obj), _pose(obj)
            except ReferenceError:
                continue
            old = known[uid]
            if old[0] != name:
                lists["renamed"].append({"from": old[0], "to": name})
                known[uid] = (name, old[1], old[2])
            if now[:PLACE] != pose[:PLACE] and not same(now[:PLACE], pose[:PLACE]):
                lists["transformed"].append(name)
            if now[PLACE:] != pose[PLACE:] and not same(now[PLACE:], pose[PLACE:]):
                lists["data_changed"].append(name)
            self._objects.unseen[uid] = (obj, now)

    def _recount(self, span: Touched) -> dict[str, int]:
        """Datablocks added (+) or removed (-) by kind: the kinds Blender tagged are counted again (each a walk of
        that kind's list in C: 4 ms for 100,000 objects), whether or not a scene uses what was added."""
        kinds = {KINDS[kind] for kind in span.kinds if kind in KINDS and KINDS[kind] in COUNTED}
        moved: dict[str, int] = {}
        for kind, count in counts(sorted(kinds)).items():
            delta = count - self._counts.get(kind, count)
            self._counts[kind] = count
            if delta:
                moved[kind] = delta
        return moved


def _unnamed(span: Touched, summary: Summary, uses: frozenset[str]) -> list[str]:
    """Of the kinds hidden objects are made of (`uses`), those Blender tagged in `span` of which nothing was named
    or counted: a vertex of a hidden object's mesh, the material or light only hidden objects use (the depsgraph
    leaves them out, so nothing says which). Told so that the call is a step: otherwise the agent's next undo would
    take the edit back unsaid. Objects themselves are compared (`Scene._unseen_changed`), never guessed: Blender
    tags objects for a selection set again, a relink or any datablock removed. Blender tags every kind of LOOKS at
    once for an edit of any one of them: they are told as "shading"."""
    counted = summary.get("datablocks", {})
    words = set()
    for kind in span.kinds & uses:
        word = KINDS.get(kind)
        if word is None or word in span.others or word in counted:
            continue
        if kind in LOOKS:
            if any(KINDS[look] in span.others or KINDS[look] in counted for look in LOOKS):
                continue  # a shading datablock named or counted: the others' tags came with it
            word = "shading"
        words.add(word)
    return sorted(words)


LOOKS = frozenset({"MATERIAL", "NODETREE", "WORLD", "IMAGE", "TEXTURE", "LIGHT"})
"""Kinds of datablock whose change changes how objects look."""
SURFACES = LOOKS - {"NODETREE"}
"""Of LOOKS, those an object's look is made of directly: a node group changes one only through its users."""


def _everything_reshaded(span: Touched, unseen: int) -> bool:
    """Blender rebuilt its relations (a parent, a constraint's target, the scene's camera, a node group made) and
    re-shaded every object it evaluates in the view layer (all but `unseen` of them), while nothing that makes an
    object's look was updated beside it: no object's look changed. Blender tags every kind of LOOKS for a node group
    made, so the updates decide: a material, world, light, image or texture edited is named when anything uses it,
    and a node group changes a look only through such a user."""
    shaded = sum("shading" in how for _, how in span.objects.values())
    view_layer = bpy.context.view_layer
    return (
        shaded > 1
        and view_layer is not None
        and shaded >= len(view_layer.objects) - unseen
        and not any(KINDS[kind] in span.others for kind in SURFACES)
    )


def _orphans() -> dict[str, int]:
    """Datablocks no one uses (nor a fake user keeps), by kind: what a save leaves out of the file."""
    found = {kind: sum(1 for d in getattr(bpy.data, kind) if d.users == 0) for kind in COUNTED}
    return {kind: n for kind, n in found.items() if n}


def _material_users() -> dict[int, int]:
    return {material.session_uid: material.users for material in bpy.data.materials}


def _only_materials_looked(span: Touched) -> bool:
    """Materials were updated and nothing else that makes a look: when one was also made, given or taken, Blender
    rebuilt its relations and re-shaded every object, and only the wearers' looks changed (a material edited alone
    re-shades its wearers only, and then every object told changed its look)."""
    return "materials" in span.others and not any(KINDS[kind] in span.others for kind in SURFACES if kind != "MATERIAL")


def _materials_given(span: Touched, lists: dict[str, list[Any]], made: set[str]) -> list[dict[str, str]]:
    """The objects that wear a material the span made, and which (one only this span could have given them): told
    as given, not as re-shaded (`lists` loses them there)."""
    given: list[dict[str, str]] = []
    for obj, _ in span.objects.values():
        with contextlib.suppress(ReferenceError):
            worn = unique([name_of(s.material) for s in obj.material_slots if s.material is not None])
            given.extend({"object": name_of(obj), "material": name} for name in worn if name in made)
    if given:  # their new look is the gift; their data stays told (a vertex or modifier edited beside it)
        wearers = {entry["object"] for entry in given}
        lists["shading_changed"] = [name for name in lists["shading_changed"] if name not in wearers]
        made_names = {f"materials/{name}" for name in made}  # counted as made, given by name
        lists["datablocks_changed"] = [name for name in lists["datablocks_changed"] if name not in made_names]
    return given


def _wearing(span: Touched, names: list[str], materials: set[str]) -> list[str]:
    """Of the objects `names` the span named, those with one of `materials` in a slot (a light or camera has none)."""
    by_name = {}
    for obj, _ in span.objects.values():
        with contextlib.suppress(ReferenceError):
            by_name[name_of(obj)] = obj
    return [
        name
        for name in names
        if name in by_name
        and any(
            slot.material is not None and name_of(slot.material) in materials for slot in by_name[name].material_slots
        )
    ]


def _evaluate() -> None:
    """Evaluate what is tagged and clear the tags: the handler folds the updates and the kinds tagged into the open
    span first. Asking for the evaluated depsgraph alone leaves the kinds tagged when nothing in it was updated (an
    edit of a hidden object, an unused datablock): Blender clears them only after an evaluation it runs the handlers
    for, so every later span would see them again."""
    bpy.context.evaluated_depsgraph_get()  # built if it was not
    bpy.context.view_layer.depsgraph.update()  # the handlers run if anything was tagged, then the tags are cleared


def _frame() -> int:
    scene = bpy.context.scene
    return scene.frame_current if scene is not None else 0


class Entry:
    """One closed span in the journal: whose (`agent:<tool>` or `user`), when, what changed."""

    __slots__ = ("author", "at", "summary")

    def __init__(self, author: str, at: float, summary: Summary) -> None:
        self.author = author
        self.at = at
        self.summary = summary


def _selected() -> tuple[str, ...]:
    view_layer = bpy.context.view_layer
    return tuple(sorted(name_of(obj) for obj in view_layer.objects.selected)) if view_layer is not None else ()
