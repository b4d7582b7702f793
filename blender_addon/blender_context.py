"""Blender's context for operators run from a timer or a job: a primitive below the domain's records."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import bpy


@contextlib.contextmanager
def window() -> Iterator[None]:
    """The first window as context in the GUI, where a timer's context has none; nothing in a background Blender."""
    manager = bpy.context.window_manager
    if bpy.context.window is None and manager is not None and len(manager.windows):
        with bpy.context.temp_override(window=manager.windows[0]):
            yield
    else:
        yield
