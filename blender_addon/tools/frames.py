"""Frame ranges rendered to a folder of PNGs: in one call (`render_frames_to_folder`) or as a task (frame_tasks.py).

Every name is checked before the first frame renders, so a refusal writes nothing; each frame is
written as the other renders are (a private scratch file renamed onto the checked name). Each frame
sets the scene's frame and output settings and puts them back, so work between two frames of a task
(another request, the user) sees the scene as it was.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import bpy

from .. import interrupt, progress
from ..errors import ToolError
from .base import MUTATING, Tool, shallow
from .render import FILE_MAX, Target, apply_settings, checked_path, render_still, restore_settings

MAX_FRAMES = 10_000
FRAMES_TIME_LIMIT = 3600.0
"""Seconds a frame range may render in one call: longer than the bridge's job timeout, which is sized for one
answer. Longer work is a task (frame_tasks.py), which holds no call open."""
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
    """The frames asked for, each with the file it goes to, checked up front (ToolError: nothing was rendered)."""

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
        self.folder = _output_folder(arguments["output_folder"])
        self.overwrite = arguments.get("overwrite", False)
        self.paths = [checked_path(str(self.folder / f"frame_{f:04d}.png"), self.overwrite) for f in self.frames]

    def __len__(self) -> int:
        return len(self.frames)

    def render(self, index: int, scene: Any) -> None:
        """Render frame `index` of the range to its file; the scene's frame and output settings are put back."""
        frame, target = self.frames[index], Target(self.paths[index], self.overwrite)
        changes = {
            "render.filepath": str(target.scratch),
            "render.image_settings.file_format": "PNG",
            "render.use_file_extension": True,
        }
        with interrupt.shielded():  # a stop waits for the render and the scene put back, then is raised
            current, saved = scene.frame_current, apply_settings(scene, changes)
            try:
                scene.frame_set(frame)  # the frame with its animation evaluated, not only the number
                render_still(
                    say=lambda done, stats: progress.report(
                        (index + (done or 0)) / len(self), f"{self.word(index)}: {stats}"
                    )
                )
                # Stopped while it rendered: the frame may be cut short, so it is not kept.
                placed = not interrupt.stopping() and target.place()
            finally:
                target.discard()
                restore_settings(scene, saved)
                scene.frame_set(current)
        interrupt.checkpoint()
        if not placed:
            raise ToolError(
                f"Blender rendered frame {frame} but wrote no file; nothing after it was rendered.", state="tool_failed"
            )

    def word(self, index: int) -> str:
        """Which frame `index` is, as the client hears it while it renders ("frame 5 (2 of 3): Sample 3/16") and
        once it is written ("frame 5 (2 of 3): written"). Only the latest word is heard at each look."""
        return f"frame {self.frames[index]} ({index + 1} of {len(self.frames)})"

    def summary(self, scene: Any) -> dict[str, Any]:
        render = scene.render
        percent = render.resolution_percentage / 100
        return {
            "folder": str(self.folder),
            "first": str(self.paths[0]),
            "last": str(self.paths[-1]),
            "count": len(self.paths),
            "width": round(render.resolution_x * percent),
            "height": round(render.resolution_y * percent),
            "engine": render.engine,
        }


def _output_folder(raw: str) -> Path:
    """An existing folder, given absolutely; the names in it are checked one by one (`checked_path`)."""
    if "\0" in raw:
        raise ToolError(f"output_folder contains a NUL byte: {raw[:200]!r}.", state="invalid_path")
    folder = Path(os.path.expanduser(bpy.path.abspath(raw)))
    if not folder.is_absolute():
        raise ToolError(f"output_folder must be absolute: {raw[:200]!r}.", state="invalid_path")
    if not folder.is_dir():
        raise ToolError(f"The folder {folder} does not exist.", state="invalid_path")
    return folder


def render_frames(arguments: dict[str, Any]) -> dict[str, Any]:
    """The whole range in this call, in place; progress after each frame; a cancel stops it between frames."""
    scene = bpy.context.scene
    frames = FrameRange(arguments, scene)
    started = time.monotonic()
    for index in range(len(frames)):
        frames.render(index, scene)
        progress.report((index + 1) / len(frames), f"{frames.word(index)}: written")
    return {"status": "ok", **frames.summary(scene), "seconds": round(time.monotonic() - started, 3)}


FRAMES_RESULT = shallow(
    status="string",
    folder="string",
    first="string",
    last="string",
    count="integer",
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
    "writes nothing. A client that asked for progress hears it after each frame; cancelling stops the range "
    "between frames, and the frames written by then stay. The interface is held while it renders; for a range "
    "longer than your client waits, use start_render_frames_task.",
    render_frames,
    input_schema=FRAMES_SCHEMA,
    output_schema=FRAMES_RESULT,
    annotations=dict(MUTATING),
    time_limit=FRAMES_TIME_LIMIT,
)
