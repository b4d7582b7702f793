"""Checkpoints: copies of the whole open file in an owner-only folder of the bridge's, to restore later.

Never beside the user's .blend and never over it: a checkpoint is written with `save_as_mainfile(copy=True)` (the
open file's path does not move), uncompressed, with relative paths kept as the user's file has them, and marked
with the user's path (`blend_header`), so a restore loads it with Blender's recover operator and the open file is
still the user's: a later save goes where theirs went. The folder is bounded by count and bytes, oldest first.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, get_type_hints

import bpy

from . import blend_header, log
from .blender_context import window
from .errors import ToolError
from .owner_files.folders import NotOwnFolder, own_folder
from .owner_files.runtime_file import pid_alive, read_record

NAME = re.compile(r"(?!(?:con|prn|aux|nul|com\d|lpt\d)(?:\..*)?$)[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}(?<![ .])", re.I)
"""A checkpoint name: letters, digits, space, `_`, `.`, `-`; no path separator, no control character, not a name
Windows reserves (CON, NUL, COM1, ...), not ending with a dot or a space (Windows drops them)."""
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
"""A file of ours made new: never through a link or over a file someone put there."""
KEPT_COUNT = 20
KEPT_BYTES = 4 * 1024**3
RESCUE_PREFIX = "rescue-"
SUFFIX = ".blend"
UNSAVED = "unsaved"
"""Where a checkpoint of a never-saved session is copied to be loaded, so a save lands there, never over it."""
UNTOUCHED = ".untouched.json"
"""Beside such a copy while nobody saved to it: its stamp as written and the Blender that made it."""


class Checkpoint:
    """One checkpoint as its note in the folder says: what `list_checkpoints` shows and a restore loads."""

    __slots__ = ("name", "saved_at", "size", "revision", "file", "rescue")

    def __init__(self, name: str, saved_at: float, size: int, revision: int, file: str, rescue: bool) -> None:
        self.name = name
        self.saved_at = saved_at
        self.size = size
        self.revision = revision
        self.file = file
        """The user's file the scene belonged to when saved ("" for an unsaved session)."""
        self.rescue = rescue

    def note(self) -> dict[str, Any]:
        """The note written beside it: every field, as `_NOTE` reads them back."""
        return {name: getattr(self, name) for name in Checkpoint.__slots__}

    def listed(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.saved_at)),
            "size": self.size,
            "revision": self.revision,
            "file": self.file,
            "rescue": self.rescue,
        }


_NOTE = {name: kind for name, kind in get_type_hints(Checkpoint.__init__).items() if name != "return"}
"""Each field of a checkpoint's note and its type: a note of other fields or types is no checkpoint."""


class Checkpoints:
    """One folder of checkpoints; `copying(True)` is said around each copy saved, so it is not the user's save."""

    def __init__(self, folder: Path, copying: Callable[[bool], None]) -> None:
        self.folder = folder
        self._copying = copying
        self._listed: tuple[int, list[Checkpoint]] | None = None

    def save(self, name: str, revision: int, *, rescue: bool = False, keep: str | None = None) -> Checkpoint:
        """Write the open file as checkpoint `name` (replacing one of that name); then the folder is bounded,
        never dropping this one nor `keep` (the checkpoint a restore is about to load)."""
        check_name(name)
        if not rescue and name.lower().startswith(RESCUE_PREFIX):
            raise ToolError(
                f"names starting with {RESCUE_PREFIX!r} are the rescue checkpoints' (each holds what a restore "
                "replaced, perhaps its only copy); choose another name. Nothing was saved",
                state="invalid_checkpoint_name",
            )
        folder = self.folder
        final = folder / f"{name}{SUFFIX}"
        partial = folder / f".{name}.{os.getpid()}.partial{SUFFIX}"
        user_file = self._user_file()
        try:
            self._own(create=True)
            with self._copy():
                bpy.ops.wm.save_as_mainfile(
                    filepath=str(partial), copy=True, compress=False, relative_remap=False, check_existing=False
                )
            partial.chmod(0o600)
            if user_file:
                blend_header.set_original_path(partial, user_file)
            os.replace(partial, final)
            record = Checkpoint(name, time.time(), final.stat().st_size, revision, user_file, rescue)
            _write_json(folder / f"{name}.json", record.note())
        except (RuntimeError, OSError, blend_header.UnknownLayout) as exc:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise ToolError(
                f"the checkpoint {name!r} could not be written in {folder}: {_why(exc)}. The scene is untouched",
                state="checkpoint_not_written",
            ) from None
        self._prune(keep={name, keep})
        return record

    def save_rescue(self, revision: int, *, keep: str) -> Checkpoint:
        """The state a restore is about to replace, as `rescue-<time>` (never dropping `keep`, the one to load)."""
        name = f"{RESCUE_PREFIX}{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() // 1_000_000 % 1000:03d}"
        return self.save(name, revision, rescue=True, keep=keep)

    def list(self) -> list[Checkpoint]:
        """Every checkpoint in the folder, newest first; none in a folder another user may change (ToolError)."""
        if not self._own(create=False):
            return []
        found = [record for meta in self.folder.glob("*.json") if (record := self._read(meta)) is not None]
        return sorted(found, key=lambda record: record.saved_at, reverse=True)

    def _read(self, meta: Path) -> Checkpoint | None:
        """The checkpoint a note in the folder holds, when the note is one (read as runtime records are: a FIFO or
        /dev/zero there is no note), names itself (a copy under another name would list one checkpoint twice) and
        its file is there."""
        note = read_record(meta)
        if note is None or note.keys() != _NOTE.keys() or not all(isinstance(note[k], _NOTE[k]) for k in _NOTE):
            return None
        record = Checkpoint(**note)
        named = record.name == meta.name.removesuffix(".json") and check_name(record.name, quiet=True)
        if named and (self.folder / f"{record.name}{SUFFIX}").is_file():
            return record
        return None

    def listed(self) -> list[Checkpoint]:
        """`list()`, read again only when the folder changed: the panel asks at every redraw."""
        try:
            stamp = self.folder.stat().st_mtime_ns
            if self._listed is None or self._listed[0] != stamp:
                self._listed = (stamp, self.list())
        except (OSError, ToolError):
            return []
        return self._listed[1]

    def find(self, name: str) -> Checkpoint:
        """Checkpoint `name`, from its own note: a restore reads one note, not the folder's twenty."""
        check_name(name)
        self._own(create=False)
        record = self._read(self.folder / f"{name}.json")
        if record is not None:
            return record
        names = [record.name for record in self.list()]
        raise ToolError(
            f"no checkpoint {name!r}; there are {len(names)}" + (f": {', '.join(names[:10])}" if names else ""),
            state="checkpoint_not_found",
            checkpoints=names[:10],
        )

    def load(self, record: Checkpoint) -> bool:
        """Load `record` as the open file: True when it is the user's file again (their path, not ours). A
        checkpoint of a never-saved session is loaded from a copy in `unsaved/`, so a save lands there, never
        over the checkpoint."""
        source = self.folder / f"{record.name}{SUFFIX}"
        here = self._user_file()
        if record.file != here or not here:  # loaded from a copy that returns to the open file's path, if any
            source = self._unsaved_copy(source, record.name, returns_to=here if here or record.file else None)
        try:
            with window():
                result = bpy.ops.wm.recover_auto_save(filepath=str(source), use_scripts=False)
        except RuntimeError as exc:
            result = {str(exc)}
        if "FINISHED" not in result:
            raise ToolError(
                f"Blender could not load the checkpoint {record.name!r}: {_why(RuntimeError(*result))}",
                state="checkpoint_not_loaded",
            )
        try:
            self._drop_untouched_copies()
        except Exception as exc:  # the checkpoint is loaded: a tidy-up that failed must not say the restore did
            log.logger.warning("checkpoints: the unsaved copies were not tidied (%s)", _why(exc))
        return bool(here) and bpy.data.filepath == here

    def _unsaved_copy(self, source: Path, name: str, returns_to: str | None) -> Path:
        """A new copy of `source` in `unsaved/`, noted as written (`UNTOUCHED`); a checkpoint of another file
        `returns_to` the open file's path ("": the copy's own), so loading it never moves where the next save goes
        (it would go over that other file's newer work)."""
        copies = self.folder / UNSAVED
        copy = copies / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() // 1000 % 10**6:06d}{SUFFIX}"
        made = False  # only a file this call made is removed when it fails: never one someone put at its name
        try:
            own_folder(copies)
            with open(source, "rb") as reading:
                fd = os.open(copy, _NEW_FILE, 0o600)
                made = True
                with open(fd, "wb") as writing:
                    shutil.copyfileobj(reading, writing)
            if returns_to is not None:
                blend_header.set_original_path(copy, returns_to)
            _write_json(_note_of(copy), {"pid": os.getpid(), "stamp": _stamp(copy)})
        except (OSError, NotOwnFolder, blend_header.UnknownLayout) as exc:
            if made:
                with contextlib.suppress(OSError):
                    copy.unlink()
            raise ToolError(
                f"the checkpoint {name!r} could not be copied into {copies} to be loaded: {_why(exc)}. The scene is "
                "untouched",
                state="checkpoint_not_loaded",
            ) from None
        return copy

    def drop(self, name: str) -> None:
        """Delete checkpoint `name` (a rescue whose restore failed: it holds nothing a restore replaced)."""
        for suffix in (SUFFIX, ".json"):
            with contextlib.suppress(OSError):
                (self.folder / f"{name}{suffix}").unlink()

    def saved(self, path: str) -> None:
        """The user saved the open file: when it is a copy of ours, it is their work from now on (its note goes).
        The stamp says the same for a save this Blender did not see; this says it however coarse the disk's clock."""
        with contextlib.suppress(OSError, RuntimeError):
            if self._is_copy(path):
                _note_of(Path(path)).unlink(missing_ok=True)

    def _drop_untouched_copies(self) -> None:
        """Delete the copies in `unsaved/` nobody saved to, but the open one and those another running Blender made
        (the folder is every Blender's of this version): each restore of an unsaved session's checkpoint makes one,
        and untouched it only repeats its checkpoint, which the folder's bound keeps or drops. A copy the user saved
        is their work: it stays, and its note goes."""
        open_now = Path(bpy.data.filepath).resolve() if bpy.data.filepath else None
        for note in (self.folder / UNSAVED).glob(f"?*{SUFFIX}{UNTOUCHED}"):
            copy = note.with_name(note.name.removesuffix(UNTOUCHED))
            with contextlib.suppress(OSError, RuntimeError):  # RuntimeError: a symlink loop (Python before 3.13)
                if copy.resolve() == open_now:
                    continue
                written = _read_note(copy)
                maker = written["pid"] if written else None
                if maker != os.getpid() and isinstance(maker, int) and pid_alive(maker):
                    continue  # another Blender's: open there, perhaps
                if written and written["stamp"] == _stamp(copy):
                    copy.unlink()
                note.unlink()

    def _user_file(self) -> str:
        """The open file's path; "" when it is a copy of ours nobody saved to (the session is unsaved)."""
        with contextlib.suppress(OSError, RuntimeError):
            if self._is_copy(bpy.data.filepath) and _untouched(Path(bpy.data.filepath)):
                return ""
        return bpy.data.filepath

    def _is_copy(self, path: str) -> bool:
        """Whether `path` is in `unsaved/` (resolved: OSError or, before Python 3.13, RuntimeError on a loop)."""
        return bool(path) and Path(path).parent.resolve() == (self.folder / UNSAVED).resolve()

    def _own(self, *, create: bool) -> bool:
        """Whether the folder is there (made when `create`; a file in its place is none); a folder another user may
        change, or reached through a link, is refused by name: what is in it is not trusted, nothing is written."""
        try:
            return own_folder(self.folder, create=create)
        except NotADirectoryError:
            if create:
                raise  # told as the checkpoint not written
            return False
        except NotOwnFolder as exc:
            raise ToolError(
                f"the checkpoint folder is not safe to use: {exc}. Nothing was read or written there; run Blender "
                "as the user who owns that folder, or set another checkpoint folder",
                state="unsafe_folder",
            ) from None

    @contextlib.contextmanager
    def _copy(self) -> Iterator[None]:
        self._copying(True)
        try:
            yield
        finally:
            self._copying(False)

    def _prune(self, keep: set[str | None]) -> None:
        """Drop the oldest checkpoints beyond KEPT_COUNT or KEPT_BYTES (a rescue is as precious as any: it may hold
        the only copy of what a restore replaced); never those in `keep`."""
        records = self.list()
        total = sum(record.size for record in records)
        for record in sorted(records, key=lambda record: record.saved_at):
            if len(records) <= KEPT_COUNT and total <= KEPT_BYTES:
                break
            if record.name in keep:
                continue
            self.drop(record.name)
            records.remove(record)
            total -= record.size


def check_name(name: str, *, quiet: bool = False) -> bool:
    if NAME.fullmatch(name):
        return True
    if quiet:
        return False
    raise ToolError(
        f"{name!r} is not a checkpoint name: use 1 to 64 letters, digits, spaces, '_', '.' or '-', starting with a "
        "letter or digit (no path separators or control characters)",
        state="invalid_checkpoint_name",
    )


def _write_json(path: Path, record: dict[str, Any]) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{time.time_ns()}.tmp")
    fd = os.open(temporary, _NEW_FILE, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump(record, file)
    os.replace(temporary, path)


def _note_of(copy: Path) -> Path:
    return copy.with_name(copy.name + UNTOUCHED)


def _read_note(copy: Path) -> dict[str, Any] | None:
    """The note beside `copy` ({"pid", "stamp"}), or None when there is none or it is not one of ours."""
    note = read_record(_note_of(copy))
    return note if note is not None and isinstance(note.get("stamp"), dict) else None


def _untouched(copy: Path) -> bool:
    """True while `copy` is as the bridge wrote it."""
    written = _read_note(copy)
    return written is not None and written["stamp"] == _stamp(copy)


def _stamp(path: Path) -> dict[str, int]:
    """The file as written: Blender saves by writing a new file and renaming it over the old one, so a save gives
    it a new inode and time (its size may well stay the same)."""
    info = path.stat()
    return {"inode": info.st_ino, "size": info.st_size, "modified_ns": info.st_mtime_ns}


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
