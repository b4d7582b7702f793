"""The real Hermes's fixtures: a Hermes host per test, on the harness in scripts/harness/hermes.py (the benchmark
drives the same one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.harness.hermes import HermesHost, ensure_hermes_python


@pytest.fixture(scope="session")
def hermes_python() -> Path:
    return ensure_hermes_python()


@pytest.fixture
def hermes(tmp_path: Path, hermes_python: Path) -> Iterator[HermesHost]:
    host = HermesHost(tmp_path, hermes_python)
    yield host
    for driver in host.drivers:
        driver.close()


@pytest.fixture
def offline_hermes(tmp_path: Path, hermes_python: Path) -> Iterator[HermesHost]:
    """A Hermes that never provisioned its uv, on a machine that cannot download it (these machines)."""
    host = HermesHost(tmp_path, hermes_python, managed_uv=False)
    yield host
    for driver in host.drivers:
        driver.close()
