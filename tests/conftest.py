"""Suite-wide set-up: Blender's user files go to a throw-away folder before bpy is imported."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import hermes_blender
from hermes_blender.blender_host import USER_FOLDER_OVERRIDES, private_user_folder
from tests.other_user import OtherUser, made_user

_BLENDER_HOME = Path(tempfile.mkdtemp(prefix="hermes-tests-blender-"))
atexit.register(shutil.rmtree, _BLENDER_HOME, True)  # also when a run exits early (pytest-blender's parent does)
if "bpy" not in sys.modules:  # else pytest-blender's Blender, started with the parent run's throw-away folder
    os.environ["BLENDER_USER_RESOURCES"] = str(private_user_folder(_BLENDER_HOME / "user"))
    for override in USER_FOLDER_OVERRIDES:  # each would move a part of it back into the user's own
        os.environ.pop(override, None)
USER_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
"""The user's cache, kept before the throw-away one replaces it: what is worth keeping between runs goes here."""
os.environ.setdefault("XDG_CACHE_HOME", str(_BLENDER_HOME / "cache"))

REPO_ROOT = Path(__file__).resolve().parent.parent
PLUGIN_ROOT = REPO_ROOT / "hermes_plugin"
VERSION = hermes_blender.__version__
"""The one version, written in hermes_blender/__init__.py (pyproject.toml reads it there; tests/agent/test_version.py
holds every other copy equal to it)."""


@pytest.fixture(scope="session")
def other_user() -> Iterator[OtherUser]:
    """A second OS user made for this run (root only; see tests/other_user.py), removed when the run ends."""
    yield from made_user()


@pytest.fixture(scope="session", autouse=True)
def _leave_nothing_behind() -> Iterator[None]:
    """The suite must end with no child process of ours still alive."""
    yield
    leftovers = psutil.Process().children(recursive=True)
    for child in leftovers:
        child.kill()
    assert not leftovers, f"processes left running by the tests: {[c.pid for c in leftovers]}"
