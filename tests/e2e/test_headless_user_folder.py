"""A headless Blender keeps to its private user folder: the user's own Blender folder is never written to.

The toolkit's Blender child links the add-on into the `user_default` repository of a throw-away
BLENDER_USER_RESOURCES. Each case here starts a real bpy process with a "user's own" folder beside the private one
and checks that folder is left exactly as it was.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hermes_blender.blender_host import USER_FOLDER_OVERRIDES, _check_floor, enable_extension, private_user_folder
from hermes_blender.client import BridgeClient
from hermes_blender.contract.liveness import RuntimeFileSpec
from hermes_blender.headless import HeadlessBlender
from tests.conftest import REPO_ROOT

ADDON = REPO_ROOT / "blender_addon"
ENABLE = f"from pathlib import Path\nfrom hermes_blender.blender_host import enable_extension\nenable_extension(Path({str(ADDON)!r}))"

CODE = (
    "import bpy, sys\nresult = {'objects': sorted(o.name for o in bpy.data.objects), "
    "'addon': sys.modules['bl_ext.user_default.hermes_bridge'].__file__}"
)


def _users_own(folder: Path) -> Path:
    """A user's own extensions folder holding their own hermes_bridge: a link to another checkout of theirs."""
    theirs = folder / "their-checkout"
    theirs.mkdir(parents=True)
    place = folder / "user_default" / "hermes_bridge"
    place.parent.mkdir(parents=True)
    place.symlink_to(theirs, target_is_directory=True)
    return place


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in (*USER_FOLDER_OVERRIDES, "BLENDER_USER_RESOURCES")}
    return subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, timeout=120, check=False
    )


def test_without_a_private_user_folder_the_addon_is_not_linked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused before bpy is imported: the link would land in the user's own extensions folder."""
    monkeypatch.delenv("BLENDER_USER_RESOURCES")
    with pytest.raises(RuntimeError, match="BLENDER_USER_RESOURCES must name a private folder"):
        enable_extension(ADDON)


def test_a_user_folder_the_toolkit_did_not_make_is_never_linked_into(tmp_path: Path) -> None:
    """BLENDER_USER_RESOURCES set by the user for their own Blender (a portable set-up, here through a link), with
    their add-on installed as a folder: it is not the toolkit's to replace, and stays as it was."""
    theirs = tmp_path / "their-blender" / "extensions" / "user_default" / "hermes_bridge"
    theirs.mkdir(parents=True)
    (theirs / "__init__.py").write_text("THEIRS = True\n")
    (tmp_path / "link").symlink_to(tmp_path / "their-blender", target_is_directory=True)
    run = _run(ENABLE, {"BLENDER_USER_RESOURCES": str(tmp_path / "link")})
    assert run.returncode != 0 and "a private folder this toolkit made" in run.stderr, run.stderr[-2000:]
    assert (theirs / "__init__.py").read_text() == "THEIRS = True\n" and not theirs.is_symlink()


@pytest.mark.parametrize("how", ["extensions_moved", "set_after_bpy_started"])
def test_a_user_folder_bpy_did_not_start_in_privately_is_left_alone(tmp_path: Path, how: str) -> None:
    """BLENDER_USER_EXTENSIONS moving the repositories to the user's, or the private folder named only after bpy
    started in the user's own: either way Blender imports from the user's folder, and nothing is linked there."""
    private = private_user_folder(tmp_path / "private")
    if how == "extensions_moved":
        theirs = _users_own(tmp_path / "their-extensions")
        run = _run(
            ENABLE, {"BLENDER_USER_RESOURCES": str(private), "BLENDER_USER_EXTENSIONS": str(theirs.parent.parent)}
        )
    else:
        theirs = _users_own(tmp_path / "home" / ".config" / "blender" / "x" / "extensions")
        code = f"import os, bpy\nos.environ['BLENDER_USER_RESOURCES'] = {str(private)!r}\n{ENABLE}"
        run = _run(code, {"BLENDER_USER_RESOURCES": str(theirs.parent.parent.parent)})
    assert run.returncode != 0 and "the add-on is not linked there" in run.stderr, run.stderr[-2000:]
    assert theirs.readlink() == theirs.parent.parent / "their-checkout"


def test_an_older_copy_in_the_private_folder_is_replaced_by_the_source(tmp_path: Path) -> None:
    """A folder used before (a copy made where links are not allowed) must not serve an older add-on."""
    place = private_user_folder(tmp_path / "private") / "extensions" / "user_default" / "hermes_bridge"
    place.mkdir(parents=True)
    (place / "__init__.py").write_text("STALE = True\ndef register(): pass\ndef unregister(): pass\n")
    code = f"{ENABLE}\nimport sys\nm = sys.modules['bl_ext.user_default.hermes_bridge']\nprint(hasattr(m, 'STALE'))"
    run = _run(code, {"BLENDER_USER_RESOURCES": str(tmp_path / "private")})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == "False"
    assert place.resolve() == ADDON.resolve()


def test_a_blender_older_than_the_manifests_floor_is_refused() -> None:
    """Blender's own compatibility check is skipped with its wheel refresh, so the floor is checked here."""
    _check_floor(ADDON, (4, 5, 0))
    with pytest.raises(RuntimeError, match="older than the add-on's floor, 4.5.0"):
        _check_floor(ADDON, (4, 4, 3))


def test_the_headless_blender_ignores_settings_that_move_parts_of_the_user_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user whose Blender keeps its extensions and config elsewhere (BLENDER_USER_EXTENSIONS, _CONFIG): the
    headless Blender serves from its private folder, and writes neither its link nor its log into theirs."""
    theirs = _users_own(tmp_path / "their-extensions")
    config = tmp_path / "their-config"
    config.mkdir()
    monkeypatch.setenv("BLENDER_USER_EXTENSIONS", str(theirs.parent.parent))
    monkeypatch.setenv("BLENDER_USER_CONFIG", str(config))
    with tempfile.TemporaryDirectory() as folder, HeadlessBlender(Path(folder) / "server.json") as blender:
        client = BridgeClient(RuntimeFileSpec(path=str(blender.runtime_file)))
        answer = asyncio.run(client.call_tool("execute_blender_code", {"code": CODE}))
        assert answer.data()["result"]["objects"] == ["Camera", "Cube", "Light"]
        served_from = Path(answer.data()["result"]["addon"])
        assert served_from.parent.parent.parent.parent == Path(blender.log_path).parent / "user"
    assert theirs.readlink() == theirs.parent.parent / "their-checkout"
    assert list(config.iterdir()) == []
