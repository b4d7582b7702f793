"""Which Blender a run with a real Blender drives: `HERMES_GUI_BLENDER`, else the launcher scripts/gui_root.sh made,
else `blender` on PATH. The GUI tier (tests/gui/harness.py) and the benchmark's farm rows both ask here."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CACHES = {Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")), Path.home() / ".cache"}
"""Where scripts/gui_root.sh may have left its launcher (the suite points XDG_CACHE_HOME at a temp folder)."""


def blender_command() -> str | None:
    """The Blender to drive; None when there is none."""
    named = os.environ.get("HERMES_GUI_BLENDER")
    if named:
        return named
    found = [path for cache in CACHES for path in (cache / "blender-bridge-ci").glob("gui-root-*.blender")]
    launchers = sorted(found, key=lambda path: path.stat().st_mtime)
    return str(launchers[-1]) if launchers else shutil.which("blender")
