"""The MCP protocol versions and envelope names the bridge speaks: the add-on's own module, loaded from the add-on
source this toolkit ships (`resources.ADDON_SOURCE`), so both sides read one file. That module imports nothing, and
is loaded on its own, without the add-on's package (which needs Blender)."""

from __future__ import annotations

import importlib.util

from .resources import ADDON_SOURCE


def _load_versions():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "hermes_blender._addon_versions", ADDON_SOURCE / "net" / "versions.py"
    )
    assert spec is not None and spec.loader is not None, f"the add-on source is missing at {ADDON_SOURCE}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


versions = _load_versions()
