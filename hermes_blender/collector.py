"""Python's cycle collector paused across a start's imports, for the processes this toolkit starts.

An import makes objects that live as long as the process (modules, classes, pydantic's schemas), almost none of
them garbage, and the collector walks them in its young and middle generations while they are made: about 50 ms
(4%) of `hermes-blender mcp`'s wait for `initialize` (the SDK's import), and about 30 ms of `hermes-blender
serve`'s start (bpy's and the add-on's), docs/performance.md. Once the imports are done everything the process
holds is frozen (moved out of every later pass): the few hundred transient objects the paused window left behind
(about 0.3 MiB, measured) stay with it. The headless Blender unfreezes them once it stops serving: Blender 4.5
exits only after Python has let go of what holds its data.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_then_frozen() -> Iterator[None]:
    """The collector off inside; after, what the process holds frozen and the collector as it was before, even when
    an import fails."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_on:
            gc.enable()
