"""The MCP protocol versions and envelope names the bridge speaks: the add-on's own module, loaded from the add-on
source this toolkit ships (`resources.ADDON_SOURCE`), so both sides read one file. That module imports nothing, and
is loaded on its own, without the add-on's package (which needs Blender)."""

from __future__ import annotations

import importlib.util

from .resources import ADDON_SOURCE


def addon_module(relative: str, name: str):  # type: ignore[no-untyped-def]
    """A module of the add-on source that imports nothing of the add-on, loaded on its own (without the add-on's
    package, which needs Blender): one file that both sides read."""
    spec = importlib.util.spec_from_file_location(f"hermes_blender._addon_{name}", ADDON_SOURCE / relative)
    assert spec is not None and spec.loader is not None, f"the add-on source is missing at {ADDON_SOURCE}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


versions = addon_module("net/versions.py", "versions")
agent_mode = addon_module("agent_mode.py", "agent_mode")
"""The agent's modes (read-only, ask, full) and what each means, as the add-on names them."""
