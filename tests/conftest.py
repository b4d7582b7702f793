"""Suite-wide set-up: Blender's user files go to a throw-away folder before bpy is imported."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_BLENDER_HOME = Path(tempfile.mkdtemp(prefix="hermes-tests-blender-"))
os.environ["BLENDER_USER_RESOURCES"] = str(_BLENDER_HOME / "user")
os.environ.setdefault("XDG_CACHE_HOME", str(_BLENDER_HOME / "cache"))

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def _remove_blender_home() -> Iterator[None]:
    yield
    shutil.rmtree(_BLENDER_HOME, ignore_errors=True)
