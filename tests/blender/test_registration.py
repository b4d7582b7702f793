"""Register and unregister are symmetric and can be repeated."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy  # first: it puts Blender's own modules (addon_utils, ...) on the path
import pytest

# isort: split
import addon_utils

from hermes_blender.blender_host import ADDON_MODULE


def _registered() -> dict[str, bool]:
    return {
        "start": "HERMES_BRIDGE_OT_start" in dir(bpy.types),
        "stop": "HERMES_BRIDGE_OT_stop" in dir(bpy.types),
        "panel": "HERMES_BRIDGE_PT_panel" in dir(bpy.types),
        "prefs": ADDON_MODULE in bpy.context.preferences.addons,
    }


def test_enable_disable_enable_again_works_twice(addon: ModuleType) -> None:
    assert all(_registered().values())
    for _ in range(2):
        addon_utils.disable(ADDON_MODULE, default_set=True)
        assert not any(_registered().values())
        addon_utils.enable(ADDON_MODULE, default_set=True, handle_error=_raise)
        assert all(_registered().values())


def test_preferences_default_to_an_os_chosen_port_and_auto_start(addon: ModuleType) -> None:
    prefs = bpy.context.preferences.addons[ADDON_MODULE].preferences
    assert prefs.http_port == 0 and prefs.auto_start is True


def test_disabling_the_addon_stops_a_running_bridge_and_removes_its_file(
    addon: ModuleType, tmp_path, runtime: Any
) -> None:
    import importlib

    service = importlib.import_module(f"{ADDON_MODULE}.service")
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "server.json", lab_port=None))
    assert bridge.runtime_file.exists()
    addon_utils.disable(ADDON_MODULE, default_set=True)
    try:
        assert not (tmp_path / "server.json").exists()
        assert runtime.bridge is None
    finally:
        addon_utils.enable(ADDON_MODULE, default_set=True, handle_error=_raise)


def _raise(exc: BaseException) -> None:
    raise exc


def test_a_fresh_install_keeps_the_blender_lab_listener_off(addon: ModuleType) -> None:
    prefs = importlib.import_module(f"{ADDON_MODULE}.prefs")
    config = prefs.config()
    assert config.lab_port is None and config.allow_code is True


def test_a_registration_that_fails_half_way_leaves_nothing_registered(
    addon: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    addon_utils.disable(ADDON_MODULE, default_set=True)
    module = importlib.import_module(ADDON_MODULE)

    def refuse(*args: object) -> None:
        raise RuntimeError("the command line cannot be extended now")

    monkeypatch.setattr(bpy.utils, "register_cli_command", refuse)
    with pytest.raises(RuntimeError, match="cannot be extended"):
        module.register()
    leftovers = [name for name, present in _registered().items() if present and name != "prefs"]
    monkeypatch.undo()
    addon_utils.enable(ADDON_MODULE, default_set=True, handle_error=_raise)
    assert leftovers == [] and all(_registered().values())


def test_auto_start_survives_blender_opening_a_file_at_launch(addon: ModuleType, tmp_path: Path) -> None:
    operators = importlib.import_module(f"{ADDON_MODULE}.operators")
    saved = tmp_path / "opened-at-launch.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(saved), copy=True)
    operators.schedule_auto_start()  # what register() does in an interactive Blender
    try:
        bpy.ops.wm.open_mainfile(filepath=str(saved))  # a double-clicked .blend loads before the event loop
        assert bpy.app.timers.is_registered(operators.auto_start)
    finally:
        if bpy.app.timers.is_registered(operators.auto_start):
            bpy.app.timers.unregister(operators.auto_start)
