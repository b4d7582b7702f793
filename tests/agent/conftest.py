"""A copy of this repository's plugin files to break one rule at a time."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PLUGIN_ROOT

Mutation = Callable[[dict[str, Any], dict[str, Any]], None]


@pytest.fixture
def plugin_copy(tmp_path: Path) -> Callable[[Mutation | None], Path]:
    """Copy plugin.json, mcp.json and skills/, apply `mutate(plugin, mcp)`, return the root."""

    def make(mutate: Mutation | None = None) -> Path:
        root = tmp_path / "plugin"
        root.mkdir()
        plugin = json.loads((PLUGIN_ROOT / "plugin.json").read_text())
        mcp = json.loads((PLUGIN_ROOT / "mcp.json").read_text())
        if mutate is not None:
            mutate(plugin, mcp)
        (root / "plugin.json").write_text(json.dumps(plugin))
        (root / "mcp.json").write_text(json.dumps(mcp))
        if (PLUGIN_ROOT / "skills").is_dir():
            shutil.copytree(PLUGIN_ROOT / "skills", root / "skills")
        return root

    return make


def servers(plugin: dict[str, Any]) -> dict[str, Any]:
    return plugin["extensions"]["com.nousresearch.hermes"]["servers"]
