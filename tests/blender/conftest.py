"""Real Blender in this process (bpy 5.1.x), with the add-on installed from the repository."""

from __future__ import annotations

import importlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from hermes_plugin.blender_host import ADDON_MODULE, enable_extension
from hermes_plugin.headless import ADDON_SOURCE


@pytest.fixture(scope="session")
def addon() -> Iterator[ModuleType]:
    import addon_utils
    import bpy

    bpy.ops.wm.read_homefile(use_factory_startup=True)
    with tempfile.TemporaryDirectory(prefix="hermes-ext-") as repo:
        module = enable_extension(ADDON_SOURCE, Path(repo))
        yield module
        addon_utils.disable(ADDON_MODULE, default_set=True)


@pytest.fixture
def service(addon: ModuleType) -> Iterator[ModuleType]:
    module = importlib.import_module(f"{ADDON_MODULE}.service")
    yield module
    module.stop()


@pytest.fixture
def factory_scene(addon: ModuleType) -> None:
    import bpy

    bpy.ops.wm.read_homefile(use_factory_startup=True)
