"""The scene's revision: a number that moves on with every change the bridge can hear of (each span of the change
record that saw one, every job that may have changed the scene), so what was kept for one revision (the pages'
counts) is known stale at the next. A primitive below the domain and the tools; no bpy.
"""

from __future__ import annotations

from collections.abc import Callable

_state = {"revision": 1}
_kept: list[Callable[[], None]] = []
"""Who keeps something for one revision: told to drop it when the revision moves."""


def current() -> int:
    return _state["revision"]


def changed() -> None:
    """The scene may have changed: a new revision, and what was kept for the last one is dropped."""
    _state["revision"] += 1
    _drop()


def restore(number: int) -> None:
    """The scene is what it was at revision `number` again (a tool took back what it set): say so. What was kept
    was dropped by the changes between, and is read again at that revision."""
    _state["revision"] = number
    _drop()


def keeping(drop: Callable[[], None]) -> None:
    """`drop` forgets what its module kept for the current revision; it is called whenever the revision moves."""
    if drop not in _kept:
        _kept.append(drop)


def _drop() -> None:
    for drop in _kept:
        drop()
