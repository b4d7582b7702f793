"""Renders write only the name they checked, even when it is swapped for a symlink while Blender renders."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import pytest

from .conftest import a_job

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def planted(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A target in a folder anyone may write to, and a victim file a symlink there will point to mid-render."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    target = shared / "out.png"

    def plant(*_: Any) -> None:
        if os.path.lexists(target):
            target.unlink()  # what another user may do in a 0777 folder
        target.symlink_to(victim)

    bpy.app.handlers.render_pre.append(plant)
    try:
        yield target, victim
    finally:
        bpy.app.handlers.render_pre.remove(plant)


@pytest.mark.parametrize("tool", ["render_viewport_to_path", "render_thumbnail_to_path"])
def test_a_symlink_planted_mid_render_is_never_followed(
    addon: ModuleType, factory_scene: None, planted: tuple[Path, Path], tool: str
) -> None:
    from hermes_blender.blender_host import ADDON_MODULE

    errors = __import__(f"{ADDON_MODULE}.errors", fromlist=["ToolError"])
    catalogue = __import__(f"{ADDON_MODULE}.tools.catalogue", fromlist=["CATALOGUE"]).CATALOGUE
    job = a_job(__import__(f"{ADDON_MODULE}.dispatch", fromlist=["QueuedDispatcher"]).QueuedDispatcher())
    target, victim = planted
    scene = bpy.context.scene
    scene.render.resolution_percentage = 10  # the path is what is tested, not the picture
    # Cycles on the CPU: EEVEE (the factory engine) opens a GPU context, and bpy 5.3's headless one has crashed
    # this whole process under load (a segfault in CI, an abort here), which no test in it outlives.
    scene.render.engine, scene.cycles.device, scene.cycles.samples = "CYCLES", "CPU", 1
    with pytest.raises(errors.ToolError, match="appeared while the render ran"):
        catalogue[tool].run({"output_path": str(target)}, job)
    assert victim.read_bytes() == b"precious" and target.is_symlink()  # left alone, nothing written through it

    target.unlink()  # the next render's path is checked clean, and the symlink is planted again meanwhile
    result = catalogue[tool].run({"output_path": str(target), "overwrite": True}, job)
    assert victim.read_bytes() == b"precious"
    assert not target.is_symlink() and target.read_bytes().startswith(PNG_SIGNATURE)
    assert result["filepath"] == str(target)
