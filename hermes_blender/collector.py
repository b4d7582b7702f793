"""Python's cycle collector paused across a start's imports, for the processes this toolkit starts.

An import makes objects that live as long as the process (modules, classes, pydantic's schemas), none of them
garbage, and the collector passes over them again and again while they are made: about a tenth of `hermes-blender
mcp`'s wait for `initialize` (the SDK's import), and about 30 ms of `hermes-blender serve`'s start (bpy's and the
add-on's), docs/performance.md. Once the imports are done the objects are frozen (kept out of later passes too)
and the collector runs again.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off inside, on again after, even when an import fails."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
