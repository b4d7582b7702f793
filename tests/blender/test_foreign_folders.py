"""A bridge run by root with another user's HOME (`sudo -E blender`) writes nothing into that user's folders: links
planted there lead nowhere, notes planted there are not checkpoints, and the bridge keeps serving."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hermes_blender.contract.liveness import RuntimeFileSpec
from tests.other_user import needs_another_user
from tests.sdk_client import SdkClient

from .conftest import serve_while

pytestmark = [pytest.mark.timeout(300), needs_another_user]
NOBODY = 65534


@pytest.fixture(autouse=True)
def _pytest_is_this_blender(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tests.sdk_client.require_own_blender", lambda endpoint: None)


def _planted(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The other user's config folder with their links and a note, and root's file the links point at."""
    roots = tmp_path / "root-only"
    roots.mkdir(mode=0o700)
    precious = roots / "precious"
    precious.write_bytes(b"root's own bytes\n")
    precious.chmod(0o644)
    theirs = tmp_path / "home" / "config" / "hermes_bridge"
    checkpoints = theirs / "checkpoints"
    checkpoints.mkdir(parents=True)
    (theirs / "bridge.log").symlink_to(precious)
    (checkpoints / f".mine.{os.getpid()}.partial.blend").symlink_to(precious)
    (checkpoints / "evil.blend").write_bytes(b"BLENDER-v500" + bytes(100))
    note = {"name": "evil", "saved_at": 4e9, "size": 112, "revision": 0, "file": str(precious), "rescue": False}
    (checkpoints / "evil.json").write_text(json.dumps(note))
    for path in [tmp_path / "home", *(tmp_path / "home").rglob("*")]:
        os.lchown(path, NOBODY, NOBODY)
    (tmp_path / "home").chmod(0o755)
    return theirs, checkpoints, precious


def test_roots_bridge_in_another_users_folder_writes_and_chmods_nothing_there_and_keeps_serving(
    service: ModuleType, factory_scene: None, tmp_path: Path, runtime: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    theirs, checkpoints, precious = _planted(tmp_path)
    bridge = runtime.start(
        service.BridgeConfig(
            runtime_file=tmp_path / "server.json",
            lab_port=None,
            log_file=theirs / "bridge.log",
            checkpoint_folder=checkpoints,
        )
    )
    client = SdkClient(RuntimeFileSpec(path=str(bridge.runtime_file)), mode="2026-07-28")  # type: ignore[arg-type]

    async def script() -> dict[str, Any]:
        names: dict[str, Callable[[], Any]] = {
            "listed": lambda: client.call_tool("list_checkpoints", {}),
            "saved": lambda: client.call_tool("save_checkpoint", {"name": "mine"}),
            "restored": lambda: client.call_tool("restore_checkpoint", {"name": "evil"}),
            "summary": lambda: client.call_tool("get_objects_summary", {}),
        }
        return {name: await call() for name, call in names.items()}

    answers = serve_while(bridge.dispatcher, lambda: asyncio.run(script()))
    assert bridge.log_file is None
    console = capfd.readouterr().err
    assert "not writing the log file" in console and "belongs to another user" in console
    for name in ("listed", "saved", "restored"):
        assert answers[name].is_error and "unsafe_folder" in answers[name].text, answers[name].text
        assert "evil" not in answers[name].text.replace(str(checkpoints), "")
    assert not answers["summary"].is_error and "Cube" in answers["summary"].text
    assert precious.read_bytes() == b"root's own bytes\n"
    assert stat.S_IMODE(precious.stat().st_mode) == 0o644
    assert sorted(p.name for p in checkpoints.iterdir()) == sorted(
        [f".mine.{os.getpid()}.partial.blend", "evil.blend", "evil.json"]
    )
