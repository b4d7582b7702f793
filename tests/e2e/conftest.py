"""Real headless Blender processes serving the bridge, found through their runtime files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_blender.headless import HeadlessBlender

SAME_ON_EVERY_LINE = {
    "test_cap_churn.py": "another user's load at the bridge's sockets: this project's admission code",
    "test_cli_helps.py": "the toolkit's commands helping a newcomer: its own output, names and signals",
    "test_cli.py": "the toolkit's commands and files; what Blender answers is the catalogue's to check",
    "test_farm_runs.py": "`farm run`'s processes, cancel and files; the export's checks are the Blender-side tests'",
    "test_hostile.py": "hostile clients and faults on the bridge's wire: this project's HTTP and MCP code",
    "test_instances.py": "several bridges and the runtime file: this project's files and pids",
    "test_modes_through_the_relay.py": "the agent's mode through the stdio relay: this project's consent and relay",
    "test_lab_relay.py": "`hermes-blender lab`'s gate and relay: the toolkit's checks, files and processes",
    "test_official_client.py": "protocol conformance with the official client: this project's MCP code",
    "test_status_cli.py": "`status` against runtime files, PATHs and Hermes homes: the toolkit's checks",
    "test_stdio_resources.py": "the stdio relay's resources and prompts: the toolkit's relay",
    "test_stdio_server.py": "the stdio relay as clients drive it: the toolkit's relay",
    "test_subscriptions.py": "resource subscriptions' wire: this project's event streams",
    "test_trust.py": "the toolkit's same-user checks on processes, sockets and files",
    "test_wheel.py": "the built wheel installed in a clean venv: packaging",
}
"""The end-to-end test files whose outcome no Blender line reaches (each speaks to this project's own wires, files
and processes; a Blender difference there is a Blender-side or catalogue test's to catch), and why. CI runs them on
the README's line alone (`-m "not same_on_every_line"` on the others, README › Blender versions); a file not
named here runs on every line."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent == Path(__file__).parent and item.path.name in SAME_ON_EVERY_LINE:
            item.add_marker("same_on_every_line")


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
