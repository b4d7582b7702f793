"""Renders to the path the agent asks for: synchronous in background, non-blocking in the GUI."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bpy

from ..errors import ToolError
from .base import MUTATING, Tool, arguments, shallow
from .context import JobContext, Report
from .python_exec import Deferred

THUMBNAIL_SIDE = 256
THUMBNAIL_SAMPLES = 16
FILE_MAX = 1024
"""Blender's path buffer, in bytes with the terminating NUL: a longer path would be cut short silently."""
PATH_SCHEMA = arguments(
    output_path={
        "type": "string",
        "minLength": 1,
        "maxLength": FILE_MAX - 1,
        "description": "Absolute path of the PNG to write (its folder must exist; .png is added if missing).",
    },
    overwrite={
        "type": "boolean",
        "default": False,
        "description": "Replace an existing file at output_path (never a symlink or anything but a regular file).",
    },
)


def render_viewport(arguments: dict[str, Any], job: JobContext) -> dict[str, Any]:
    """The viewport's look: an OpenGL render in the GUI, a Workbench render in background."""
    target = output_path(arguments["output_path"], arguments.get("overwrite", False))
    scene = bpy.context.scene
    changes: dict[str, Any] = {
        "render.filepath": str(target.scratch),
        **png_output(scene),
        "render.use_file_extension": True,
    }
    if bpy.app.background:
        changes["render.engine"] = "BLENDER_WORKBENCH"
    saved = apply_settings(scene, changes)
    started = time.monotonic()
    try:
        if bpy.app.background:
            render_still(say=job.report)
        else:
            window = bpy.context.window or bpy.context.window_manager.windows[0]
            area = next((a for a in window.screen.areas if a.type == "VIEW_3D"), None)
            if area is None:
                raise ToolError("The current screen has no 3D Viewport to render.", state="not_found")
            region = next(r for r in area.regions if r.type == "WINDOW")
            with bpy.context.temp_override(window=window, area=area, region=region):
                bpy.ops.render.opengl(write_still=True)
        return _result(scene, target, started, responsive=False)
    finally:
        restore_settings(scene, saved)
        target.discard()


def render_thumbnail(arguments: dict[str, Any], job: JobContext) -> dict[str, Any] | Deferred:
    """A small final render with the scene's own engine.

    Only Cycles renders off the main thread, so only a Cycles render in the GUI is deferred (the
    interface and other calls go on meanwhile), with Blender's render window suppressed. EEVEE and
    Workbench hold the event loop whichever way they are started, so they render in place.
    """
    target = output_path(arguments["output_path"], arguments.get("overwrite", False))
    scene = bpy.context.scene
    render = scene.render
    scale = THUMBNAIL_SIDE / max(render.resolution_x, render.resolution_y)
    changes: dict[str, Any] = {
        "render.filepath": str(target.scratch),
        **png_output(scene),
        "render.use_file_extension": True,
        "render.resolution_percentage": 100,
        "render.resolution_x": max(1, round(render.resolution_x * scale)),
        "render.resolution_y": max(1, round(render.resolution_y * scale)),
    }
    cycles = render.engine == "CYCLES"
    if cycles:
        changes["cycles.samples"] = min(scene.cycles.samples, THUMBNAIL_SAMPLES)
        if scene.cycles.use_denoising and not scene.cycles.denoiser:
            changes["cycles.use_denoising"] = False  # this build has no denoiser: Blender would write nothing
    saved = apply_settings(scene, changes)
    started = time.monotonic()
    if bpy.app.background or not cycles:
        try:
            render_still(say=job.report)
            return _result(scene, target, started, responsive=False)
        finally:
            restore_settings(scene, saved)
            target.discard()
    preferences = bpy.context.preferences
    shown = apply_settings(preferences, {"view.render_display_type": "NONE"})  # no "Blender Render" window left behind

    def restore() -> None:
        restore_settings(scene, saved)
        restore_settings(preferences, shown)
        target.discard()

    try:
        render_still("INVOKE_DEFAULT", say=job.report)
    except BaseException:  # the render never started: nothing will poll, so restore now
        restore()
        raise

    def poll() -> dict[str, Any] | None:
        if bpy.app.is_job_running("RENDER"):
            return None
        try:
            return _result(scene, target, started, responsive=True)
        finally:
            restore()

    return Deferred(poll)


def png_output(scene: Any) -> dict[str, Any]:
    """The settings that make a render write one PNG, whatever the scene writes (Blender 5 refuses PNG while the
    output is a video or a multilayer image until the media type is an image)."""
    media = {"render.image_settings.media_type": "IMAGE"} if hasattr(scene.render.image_settings, "media_type") else {}
    return {**media, "render.image_settings.file_format": "PNG"}


def render_still(*how: str, say: Report) -> None:
    """Render the current frame (in place, or started with INVOKE_DEFAULT); Blender's own reason when it refuses
    (e.g. no camera). Blender's render stats go to `say` as they come (a client that asked hears them). Called
    inside the job's `shielded()`, with the settings it changes and puts back: a stop waits until they are back."""
    try:
        with stats_told(say):
            bpy.ops.render.render(*how, write_still=True)
    except RuntimeError as exc:
        reason = str(exc).strip().removeprefix("Error:").strip() or "no reason given"
        raise ToolError(f"Blender could not render: {reason}", state="tool_failed") from None


_SAMPLES = re.compile(r"\bSample (\d+)/(\d+)")


@contextlib.contextmanager
def stats_told(say: Report) -> Iterator[None]:
    """While inside, each line of Blender's render stats (the `render_stats` handler: "Mem: 3M | Sample 5/16") is
    told to `say`: its last part, and how far this render is when it counts samples (Cycles does)."""

    def heard(stats: str, *_: Any) -> None:
        found = _SAMPLES.search(stats)
        fraction = min(1.0, int(found[1]) / int(found[2])) if found and int(found[2]) else None
        say(fraction, stats.rsplit(" | ", 1)[-1].strip()[:200])

    bpy.app.handlers.render_stats.append(heard)
    try:
        yield
    finally:
        bpy.app.handlers.render_stats.remove(heard)


class Target:
    """Where a render goes: Blender writes a scratch file in a private folder, which is then renamed into place.

    Blender opens its output path when the render ends, seconds or minutes after the path was checked; in a
    folder others may write to, the file could by then be a symlink to anything this user may write. A
    rename replaces whatever name is at the target and follows no link, so only the checked name is written.
    """

    def __init__(self, path: Path, overwrite: bool) -> None:
        self.path = path
        self.overwrite = overwrite
        self._folder = Path(tempfile.mkdtemp(prefix="hermes-render-"))  # 0700, in the user's temp folder
        self.scratch = self._folder / path.name

    def place(self) -> bool:
        """Move the finished render into place; False when Blender wrote nothing."""
        if not self.scratch.is_file():
            return False
        if not self.overwrite and os.path.lexists(self.path):
            raise ToolError(
                f"{self.path} appeared while the render ran; it was left alone (pass overwrite: true to replace it).",
                state="file_exists",
                filepath=str(self.path),
            )
        try:
            os.replace(self.scratch, self.path)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            self._copy_across()
        return True

    def _copy_across(self) -> None:
        """The temp folder is on another file system: copy beside the target, under a new name, then rename."""
        fd, name = tempfile.mkstemp(prefix=".hermes-render-", suffix=".png", dir=self.path.parent)  # O_EXCL
        try:
            with open(fd, "wb") as out, open(self.scratch, "rb") as source:
                shutil.copyfileobj(source, out)
            os.chmod(name, stat.S_IMODE(os.stat(self.scratch).st_mode))  # as Blender made it, not mkstemp's 0600
            os.replace(name, self.path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(name)

    def discard(self) -> None:
        shutil.rmtree(self._folder, ignore_errors=True)


def output_path(raw: str, overwrite: bool) -> Target:
    """Where a render of the file named `raw` goes (`checked_path`)."""
    return Target(checked_path(raw, overwrite), overwrite)


def checked_path(raw: str, overwrite: bool) -> Path:
    """The file a render will write, exactly.

    Refused: NUL bytes and lone surrogates (Blender would write elsewhere), paths as long as its
    buffer or longer (cut short silently), symlinks and anything that is not a regular file
    (a FIFO would freeze Blender), and an existing file unless `overwrite` says so.
    """
    if "\0" in raw:
        raise _invalid(raw, "contains a NUL byte")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise _invalid(raw, "is not valid text (a lone surrogate)") from None
    path = Path(os.path.expanduser(bpy.path.abspath(raw)))
    if not path.is_absolute():
        raise _invalid(raw, "must be absolute")
    if path.suffix.lower() != ".png":
        path = path.with_name(path.name + ".png")
    if len(os.fsencode(path)) >= FILE_MAX:
        raise _invalid(raw, f"is too long: Blender keeps at most {FILE_MAX - 1} bytes of a path")
    if not path.parent.is_dir():
        raise ToolError(f"The folder {path.parent} does not exist.", state="invalid_path")
    if path.is_symlink():
        raise _invalid(raw, f"names a symlink ({path}); give the real file's path")
    if path.exists():
        if not stat.S_ISREG(path.stat().st_mode):
            raise _invalid(raw, f"names something that is not a regular file ({path})")
        if not overwrite:
            raise ToolError(
                f"{path} exists; pass overwrite: true to replace it.", state="file_exists", filepath=str(path)
            )
    return path


def _invalid(raw: str, why: str) -> ToolError:
    return ToolError(f"output_path {why}: {raw[:200]!r}.", state="invalid_path")


def _result(scene: Any, target: Target, started: float, *, responsive: bool) -> dict[str, Any]:
    path = target.path
    if not target.place():
        raise ToolError(
            f"Blender finished rendering but wrote no file at {path}; its reason is in Blender's status bar "
            "and Info editor.",
            state="tool_failed",
        )
    render = scene.render
    percent = render.resolution_percentage / 100
    return {
        "status": "ok",
        "filepath": str(path),
        "width": round(render.resolution_x * percent),
        "height": round(render.resolution_y * percent),
        "engine": render.engine,
        "seconds": round(time.monotonic() - started, 3),
        "interface_responsive": responsive,
    }


def apply_settings(root: Any, changes: dict[str, Any], saved: dict[str, Any] | None = None) -> dict[str, Any]:
    """Set dotted attributes of `root` (the scene, or the preferences); return their previous values for
    `restore_settings`, recorded in `saved` as each is set. One Blender refuses (a value the current state does not
    allow) puts back those set before it, then raises: nothing is left half set."""
    saved = {} if saved is None else saved
    try:
        for dotted, value in changes.items():
            owner, name = _owner(root, dotted)
            previous = getattr(owner, name)
            setattr(owner, name, value)
            saved.setdefault(dotted, previous)
    except (TypeError, ValueError, AttributeError) as exc:
        restore_settings(root, saved)
        saved.clear()
        raise ToolError(f"Blender refused a render setting ({dotted}): {exc}", state="tool_failed") from None
    return saved


def restore_settings(root: Any, saved: dict[str, Any]) -> None:
    for dotted, value in reversed(list(saved.items())):
        owner, name = _owner(root, dotted)
        setattr(owner, name, value)


def _owner(root: Any, dotted: str) -> tuple[Any, str]:
    *path, name = dotted.split(".")
    owner = root
    for part in path:
        owner = getattr(owner, part)
    return owner, name


def _held(render: Callable[[dict[str, Any], JobContext], Any]) -> Callable[[dict[str, Any], JobContext], Any]:
    """The render tool run with a stop asked meanwhile held until it returns, then raised."""
    return lambda arguments, job: job.interrupts.held(render, arguments, job)


RENDER_RESULT = shallow(
    status="string",
    filepath="string",
    width="integer",
    height="integer",
    engine="string",
    seconds="number",
    interface_responsive="boolean",
)

RENDER_TOOLS = (
    Tool(
        "render_viewport_to_path",
        "Render the viewport",
        "Render what the 3D Viewport shows to a PNG at output_path (background Blender: a Workbench render).",
        _held(render_viewport),  # a stop waits for the render and the settings put back
        input_schema=PATH_SCHEMA,
        output_schema=RENDER_RESULT,
        annotations=dict(MUTATING),
    ),
    Tool(
        "render_thumbnail_to_path",
        "Render a thumbnail",
        f"Render the scene with its own engine at {THUMBNAIL_SIDE} px on the longest side to a PNG at output_path; "
        "render settings are restored afterwards. With Cycles the interface stays responsive while it renders; "
        "EEVEE and Workbench hold it for the render's duration (interface_responsive says which). Denoising is "
        "skipped where this Blender has no denoiser.",
        _held(render_thumbnail),
        input_schema=PATH_SCHEMA,
        output_schema=RENDER_RESULT,
        annotations=dict(MUTATING),
    ),
)
