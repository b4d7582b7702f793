"""Real headless Blender processes serving the bridge, found through their runtime files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_blender.headless import HeadlessBlender


@pytest.fixture(scope="module")
def blender(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeadlessBlender]:
    """One shared bridge for tests that leave it running."""
    runtime_file = tmp_path_factory.mktemp("runtime") / "server.json"
    with HeadlessBlender(runtime_file) as running:
        yield running


@pytest.fixture
def own_blender(tmp_path: Path) -> Iterator[HeadlessBlender]:
    """A bridge of this test's own, for tests that stop or kill it."""
    with HeadlessBlender(tmp_path / "Blender" / "server.json") as running:
        yield running
