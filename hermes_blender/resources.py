"""The files the toolkit ships beside its code: the Hermes plugin root and the add-on source.

A built wheel carries both under `_bundled/` (see pyproject's force-include), so an installed
`hermes-blender` works far from any checkout; in a source checkout they are the repository's own
folders, so an edit there is what the toolkit checks and builds.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _shipped(name: str) -> Path:
    bundled = _PACKAGE / "_bundled" / name
    return bundled if bundled.is_dir() else _PACKAGE.parent / name


PLUGIN_ROOT = _shipped("hermes_plugin")
"""What Hermes installs: plugin.json, mcp.json and skills/, nothing else."""
ADDON_SOURCE = _shipped("blender_addon")
"""The Blender extension's source folder (id hermes_bridge)."""
