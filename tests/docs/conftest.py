"""The documentation site, built once per run as CI builds it (`mkdocs build --strict`), into a temporary folder."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO_ROOT

DOCS = REPO_ROOT / "docs"
BUILD_SECONDS = 60
"""The most a strict build may take: CI builds the site on every run, and it has taken a few seconds."""


def docs_hooks() -> ModuleType:
    """scripts/docs_hooks.py, the module mkdocs.yml names as its hook (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO_ROOT / "scripts" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("site")
    began = time.monotonic()
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_SECONDS * 2,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    took = time.monotonic() - began
    assert built.returncode == 0, built.stderr[-4000:]
    assert took < BUILD_SECONDS, f"the strict build took {took:.1f} s"
    yield folder
