"""Let pytest-blender take over a run only when asked: `uv run pytest --blender-executable PATH`.

pytest-blender re-runs every session inside Blender as soon as it is installed; loaded early
through `addopts`, this plugin blocks it before entry points load unless the command line
names a Blender, so a plain `uv run pytest` is never hijacked.
"""

from __future__ import annotations

import sys

import pytest

OPTION = "--blender-executable"


def asked_for_blender(argv: list[str]) -> bool:
    return any(arg == OPTION or arg.startswith(f"{OPTION}=") for arg in argv)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    if not asked_for_blender(sys.argv[1:]):
        pluginmanager.set_blocked("pytest-blender")
