"""Frame ranges rendered to a folder of PNGs: in one call (`render_frames_to_folder`) or as a task (frame_tasks.py).

The folder is opened once, at the start, and every frame goes into the directory that open found, whatever is
done to its path meanwhile: another user who may write to the folder's parent can rename the folder and leave a
symlink in its place, and a lookup by path at each frame followed it (a red team put 39 frames in a root-only
folder that way). Blender writes only by path, so it renders into a private scratch folder and the frame is then
linked (or, with `overwrite`, renamed) into the held directory by name, which never follows or replaces a link
planted there. A folder other users may write to, beyond adding names in a sticky folder, is refused.

Every name is checked before the first frame renders, so a refusal writes nothing. A frame whose name another
user or process takes after the start is skipped, never written through or replaced, and the answer says so.
Each frame sets the scene's frame and output settings and puts them back, so work between two frames of a task
(another request, the user) sees the scene as it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import bpy

from ..errors import ToolError
from ..owner_files.folders import HELD, others_may_write
from .base import MUTATING, Tool, shallow
from .context import JobContext
from .render import FILE_MAX, Target, apply_settings, png_output, render_still, restore_settings

MAX_FRAMES = 10_000
FRAMES_TIME_LIMIT = 3600.0
"""Seconds a frame range may render in one call: longer than the bridge's job timeout, which is sized for one
answer. Longer work is a task (frame_tasks.py), which holds no call open."""
SKIPS_SHOWN = 20
"""Skipped frames named in an answer (the first ones); `skipped_count` counts them all."""
TAKEN = frozenset({errno.EEXIST, errno.EISDIR, errno.ENOTEMPTY, errno.EPERM})
"""What linking or renaming onto a name another user holds meets (EPERM: their file in a sticky folder)."""
COPY_CHUNK = 1 << 20
FRAMES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "output_folder": {
            "type": "string",
            "minLength": 1,
            "maxLength": FILE_MAX - 16,
            "description": "Absolute path of an existing folder; each frame is written there as frame_0001.png etc.",
        },
        "frame_start": {"type": "integer", "description": "First frame (default: the scene's start)."},
        "frame_end": {"type": "integer", "description": "Last frame, included (default: the scene's end)."},
        "frame_step": {"type": "integer", "minimum": 1, "default": 1, "description": "Render every n-th frame."},
        "overwrite": {
            "type": "boolean",
            "default": False,
            "description": "Replace frames already in the folder (never a symlink or anything but a regular file).",
        },
    },
    "required": ["output_folder"],
    "additionalProperties": False,
}


class FrameRange:
    """The frames asked for, each with the name it takes in the folder held open, checked up front (ToolError:
    nothing was rendered). `close` lets the folder go; the range renders nothing after it."""

    def __init__(self, arguments: dict[str, Any], scene: Any) -> None:
        start = arguments.get("frame_start", scene.frame_start)
        end = arguments.get("frame_end", scene.frame_end)
        self.frames = range(start, end + 1, arguments.get("frame_step", 1))
        if not self.frames:
            raise ToolError(
                f"frame_end ({end}) is before frame_start ({start}); nothing was rendered.", state="invalid_arguments"
            )
        if len(self.frames) > MAX_FRAMES:
            raise ToolError(
                f"{len(self.frames)} frames is more than {MAX_FRAMES} at once; render the range in parts.",
                state="invalid_arguments",
            )
        self.overwrite: bool = arguments.get("overwrite", False)
        self.folder = _output_folder(arguments["output_folder"])
        self._fd = _held(self.folder)
        self.last_written: Path | None = None
        self.skipped: list[dict[str, Any]] = []
        self.skipped_count = 0
        try:
            _refuse_shared(self.folder, self._fd)
            for index in range(len(self.frames)):
                self._check(self.name(index))
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self.frames)

    def name(self, index: int) -> str:
        return f"frame_{self.frames[index]:04d}.png"

    def path(self, index: int) -> Path:
        return self.folder / self.name(index)

    def close(self) -> None:
        """Let the folder go (idempotent): when the range ends, is cancelled or abandoned."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def render(self, index: int, scene: Any, job: JobContext) -> str | None:
        """Render frame `index` of the range into the folder; None once it is written, else why it was skipped
        (also in `skipped`). The scene's frame and output settings are put back."""
        frame, name = self.frames[index], self.name(index)
        if HELD and self._fd is None:
            raise ToolError("the range has ended and let its folder go; nothing more is rendered", state="tool_failed")
        if taken := self._taken(name):
            return self._skip(index, f"{taken} after the range started; it was left alone and the frame not rendered")
        target = Target(self.path(index), self.overwrite)  # only its private scratch folder is used
        changes = {
            "render.filepath": str(target.scratch),
            **png_output(scene),
            "render.use_file_extension": True,
        }
        refused: str | None = None
        with job.interrupts.shielded():  # a stop waits for the render and the scene put back, then is raised
            current, saved = scene.frame_current, apply_settings(scene, changes)
            try:
                scene.frame_set(frame)  # the frame with its animation evaluated, not only the number
                if not job.interrupts.stopping():  # a stop asked while the frame was set begins no render
                    render_still(
                        say=lambda done, stats: job.report(
                            (index + (done or 0)) / len(self), f"{self.word(index)}: {stats}"
                        )
                    )
                # Stopped while it rendered: the frame may be cut short, so it is not kept.
                placed = not job.interrupts.stopping() and target.scratch.is_file()
                if placed:
                    refused = self._place(target.scratch, name)
            finally:
                target.discard()
                restore_settings(scene, saved)
                scene.frame_set(current)
        job.interrupts.checkpoint()
        if not placed:
            raise ToolError(
                f"Blender rendered frame {frame} but wrote no file; nothing after it was rendered.", state="tool_failed"
            )
        if refused is not None:
            return self._skip(index, f"{name} was taken while the frame rendered ({refused}); it was left alone")
        self.last_written = self.path(index)
        return None

    def word(self, index: int) -> str:
        """Which frame `index` is, as the client hears it while it renders ("frame 5 (2 of 3): Sample 3/16") and
        once it is written ("frame 5 (2 of 3): written"). Only the latest word is heard at each look."""
        return f"frame {self.frames[index]} ({index + 1} of {len(self.frames)})"

    def summary(self, scene: Any) -> dict[str, Any]:
        render = scene.render
        percent = render.resolution_percentage / 100
        return {
            "folder": str(self.folder),
            "first": str(self.path(0)),
            "last": str(self.path(len(self) - 1)),
            "count": len(self),
            "skipped": self.skipped,
            "skipped_count": self.skipped_count,
            "width": round(render.resolution_x * percent),
            "height": round(render.resolution_y * percent),
            "engine": render.engine,
        }

    def _at(self, name: str) -> str:
        """`name` as the os calls below take it with `dir_fd=self._fd`: itself in the folder held open, else a path."""
        return name if self._fd is not None else str(self.folder / name)

    def _check(self, name: str) -> None:
        """At the start: a name the range may take (nothing there, or a file to replace with `overwrite`)."""
        try:
            found = os.stat(self._at(name), dir_fd=self._fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        path = self.folder / name
        if stat.S_ISLNK(found.st_mode):
            raise ToolError(f"{path} is a symlink; frames are never written through one.", state="invalid_path")
        if not stat.S_ISREG(found.st_mode):
            raise ToolError(f"{path} is there and is not a regular file.", state="invalid_path")
        if not self.overwrite:
            raise ToolError(
                f"{path} exists; pass overwrite: true to replace it.", state="file_exists", filepath=str(path)
            )

    def _taken(self, name: str) -> str | None:
        """Before a frame renders: what now holds its name that the range must leave alone, if anything."""
        try:
            found = os.stat(self._at(name), dir_fd=self._fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if self.overwrite and stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid():
            return None
        return f"{name} was put in the folder (a {_kind(found.st_mode)} of uid {found.st_uid})"

    def _place(self, scratch: Path, name: str) -> str | None:
        """The rendered `scratch` in as `name`, in the folder held open; why not, when the name was taken meanwhile.

        link(2) and rename(2) act on the name itself: a symlink there is never followed, and a link refuses an
        existing name (a rename replaces it: `overwrite`). Neither crosses file systems: then the frame is first
        copied in beside it, under a fresh name only this call creates, so a reader never sees half a frame."""
        target, fd = self._at(name), self._fd
        source, source_fd = scratch, None
        if os.stat(scratch).st_dev != os.stat(self._at("."), dir_fd=fd).st_dev:
            source, source_fd = self._at(f".hermes-{os.urandom(8).hex()}.png"), fd
            self._copy_in(scratch, source)
        try:
            if self.overwrite:
                os.replace(source, target, src_dir_fd=source_fd, dst_dir_fd=fd)
            else:
                try:
                    os.link(source, target, src_dir_fd=source_fd, dst_dir_fd=fd)
                except OSError as exc:
                    if exc.errno == errno.EEXIST:
                        raise
                    self._copy_in(scratch, target)  # a file system without hard links (FAT): written in place
        except OSError as exc:
            if exc.errno in TAKEN:
                return os.strerror(exc.errno)
            raise
        finally:
            if source_fd is not None:  # the copy, linked in or left behind (renamed: gone already)
                with contextlib.suppress(OSError):
                    os.unlink(source, dir_fd=fd)
        return None

    def _copy_in(self, scratch: Path, target: str) -> None:
        """`scratch` copied to a new `target` in the folder: O_CREAT|O_EXCL never opens what is there, link or not."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        out = os.open(target, flags, 0o666, dir_fd=self._fd)
        try:
            with open(out, "wb") as sink, open(scratch, "rb") as source:
                shutil.copyfileobj(source, sink, COPY_CHUNK)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(target, dir_fd=self._fd)
            raise

    def _skip(self, index: int, reason: str) -> str:
        self.skipped_count += 1
        if len(self.skipped) < SKIPS_SHOWN:
            self.skipped.append({"frame": self.frames[index], "file": self.name(index), "reason": reason})
        return reason


def _kind(mode: int) -> str:
    return "symlink" if stat.S_ISLNK(mode) else "file" if stat.S_ISREG(mode) else "non-regular entry"


def _output_folder(raw: str) -> Path:
    """An existing folder, given absolutely, with every link in its path resolved."""
    if "\0" in raw:
        raise ToolError(f"output_folder contains a NUL byte: {raw[:200]!r}.", state="invalid_path")
    folder = Path(os.path.expanduser(bpy.path.abspath(raw)))
    if not folder.is_absolute():
        raise ToolError(f"output_folder must be absolute: {raw[:200]!r}.", state="invalid_path")
    if not folder.is_dir():
        raise ToolError(f"The folder {folder} does not exist.", state="invalid_path")
    return Path(os.path.realpath(folder))


def _held(folder: Path) -> int | None:
    """`folder` opened one name at a time from the root, none of them through a link (O_NOFOLLOW): it was resolved,
    so a link met now was put there since, and a held directory is the one that path named. None on Windows."""
    if not HELD:
        return None
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        fd = os.open(folder.anchor, flags)
        for part in folder.parts[1:]:
            parent = fd
            try:
                fd = os.open(part, flags, dir_fd=parent)
            finally:
                os.close(parent)
    except OSError as exc:
        raise ToolError(
            f"The folder {folder} could not be opened ({exc.strerror}): a part of its path changed while it was "
            "looked up, or this user may not enter it.",
            state="invalid_path",
        ) from None
    return fd


def _refuse_shared(folder: Path, fd: int | None) -> None:
    """A folder another user may write to, other than adding names of their own in a sticky one, is refused: they
    could rename or replace what the range writes. Decided on the held directory, not on its path."""
    if fd is None:
        return  # Windows: access lists, not mode bits, say who may write
    found = os.fstat(fd)
    why = others_may_write(found, fd)
    if why is not None:
        raise ToolError(
            f"The folder {folder} is not safe for frames: {why}. Render into a folder only you may write to "
            "(or a sticky one such as /tmp), e.g. a new one made with mode 0700 or 0755.",
            state="unsafe_folder",
        )


def render_frames(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    """The whole range in this call, in place; progress after each frame; a cancel stops it between frames."""
    scene = bpy.context.scene
    frames = FrameRange(arguments, scene)
    started = time.monotonic()
    try:
        for index in range(len(frames)):
            skipped = frames.render(index, scene, job)
            job.report((index + 1) / len(frames), f"{frames.word(index)}: {'skipped' if skipped else 'written'}")
    finally:
        frames.close()
    return {"status": "ok", **frames.summary(scene), "seconds": round(time.monotonic() - started, 3)}


FRAMES_RESULT = shallow(
    status="string",
    folder="string",
    first="string",
    last="string",
    count="integer",
    skipped="array",
    skipped_count="integer",
    width="integer",
    height="integer",
    engine="string",
    seconds="number",
)

RENDER_FRAMES = Tool(
    "render_frames_to_folder",
    "Render a frame range",
    "Render frames frame_start..frame_end (default: the scene's range) with the scene's engine and settings "
    "to output_folder as frame_0001.png etc. Every name is checked before the first frame, so a refusal "
    "writes nothing; a folder other users may write to (unless it is sticky, like /tmp) is refused. A frame "
    "whose name someone else takes meanwhile is skipped, never written through: `skipped` says which and why. A "
    "client that asked for progress hears it after each frame; cancelling stops the range between frames, and "
    "the frames written by then stay. The interface is held while it renders; for a range longer than your "
    "client waits, use start_render_frames_task.",
    render_frames,
    input_schema=FRAMES_SCHEMA,
    output_schema=FRAMES_RESULT,
    annotations=dict(MUTATING),
    time_limit=FRAMES_TIME_LIMIT,
)
