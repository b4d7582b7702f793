"""The GUI tier: a real interactive Blender under Xvfb. It must run in CI; elsewhere it may skip."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gui.harness import (
    ARTIFACTS,
    INSTALL_HINT,
    GuiBlender,
    blender_command,
    blender_version,
    free_port,
    missing_tools,
    xvfb,
)


@pytest.fixture(scope="session")
def display(request: pytest.FixtureRequest) -> Iterator[str]:
    missing = missing_tools()
    if missing:
        message = f"{INSTALL_HINT}; missing: {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the GUI tier: {message}")
        pytest.skip(f"GUI tier skipped: {message}")
    command = blender_command()
    assert command is not None
    which = f"GUI tier: {blender_version(command)[0]} ({command})"
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # a fixture's output is captured: this line is for the reader
            reporter.write_line(which)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "blender.txt").write_text(which + "\n")
    with xvfb() as name:
        yield name


def _launched(root: Path, display: str, *, lab: bool = True) -> GuiBlender:
    blender = GuiBlender(root, display, lab_port=free_port() if lab else None)
    blender.install_addon()
    blender.launch()
    return blender


@pytest.fixture(scope="module")
def gui(tmp_path_factory: pytest.TempPathFactory, display: str) -> Iterator[GuiBlender]:
    """One interactive Blender shared by a module's tests that leave it running."""
    blender = _launched(tmp_path_factory.mktemp("gui"), display)
    yield blender
    blender.kill()


@pytest.fixture
def own_gui(tmp_path: Path, display: str) -> Iterator[GuiBlender]:
    """An interactive Blender of this test's own, for tests that stop, quit or kill it."""
    blender = _launched(tmp_path, display)
    yield blender
    blender.kill()
