"""The extension zip: built and validated by Blender's own tools, installed, and serving from there."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

from hermes_blender.addon_package import build_addon
from hermes_blender.client import BridgeClient
from hermes_blender.contract.liveness import RuntimeFileSpec
from tests.conftest import PLUGIN_ROOT, REPO_ROOT, VERSION

SERVE_INSTALLED = """
import importlib, sys, bpy, addon_utils
bpy.ops.wm.read_userpref()  # as an interactive Blender does at startup
module = "bl_ext.user_default.hermes_bridge"
if not addon_utils.check(module)[1]:
    sys.exit("the installed extension is not enabled")
cli = importlib.import_module(module + ".cli")
sys.exit(cli.run(["--runtime-file", sys.argv[1], "--no-lab", "--stop-on-stdin-eof"]))
"""


def test_the_built_zip_passes_blenders_validator_and_holds_only_the_addon(tmp_path: Path) -> None:
    zip_path = build_addon(tmp_path)
    assert zip_path.name == f"hermes_bridge-{VERSION}.zip"
    names = zipfile.ZipFile(zip_path).namelist()
    assert {"blender_manifest.toml", "net/lab_protocol.py", "LICENSE"} <= set(names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_installed_into_a_fresh_user_folder_the_bridge_starts_from_it(tmp_path: Path) -> None:
    env = {**os.environ, "BLENDER_USER_RESOURCES": str(tmp_path / "user")}
    install = subprocess.run(
        [sys.executable, "-m", "hermes_blender.cli", "install-addon"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    assert "Start with Blender" in install.stderr
    assert (tmp_path / "user" / "extensions" / "user_default" / "hermes_bridge" / "blender_manifest.toml").is_file()

    runtime_file = tmp_path / "server.json"
    server = subprocess.Popen(
        [sys.executable, "-c", SERVE_INSTALLED, str(runtime_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 120
        while not runtime_file.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert runtime_file.exists(), server.stdout.read().decode() if server.poll() is not None else "no runtime file"
        assert json.loads(runtime_file.read_text())["pid"] == server.pid
        result = asyncio.run(BridgeClient(RuntimeFileSpec(path=str(runtime_file))).call_tool("get_objects_summary"))
        assert not result.is_error and result.structured["active_object"] == "Cube"
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(60)
    assert server.returncode == 0 and not runtime_file.exists()


def test_the_manifest_is_publishable_gpl_with_the_projects_own_addresses() -> None:
    manifest = tomllib.loads((REPO_ROOT / "blender_addon" / "blender_manifest.toml").read_text())
    plugin = json.loads((PLUGIN_ROOT / "plugin.json").read_text())
    assert manifest["license"] == ["SPDX:GPL-3.0-or-later"]
    assert "GNU GENERAL PUBLIC LICENSE" in (REPO_ROOT / "blender_addon" / "LICENSE").read_text()[:200]
    assert manifest["website"] == plugin["homepage"] == plugin["repository"]
    assert manifest["maintainer"].endswith(f"<{plugin['homepage']}/issues>")


def test_the_extension_bundles_no_wheels_so_the_headless_start_skips_blenders_wheel_refresh() -> None:
    """blender_host enables the add-on with refresh_handled: a wheel declared here would never be installed."""
    manifest = tomllib.loads((REPO_ROOT / "blender_addon" / "blender_manifest.toml").read_text())
    assert "wheels" not in manifest


def test_the_extension_floor_and_the_blender_servers_min_version_are_the_same_line() -> None:
    """The floor is what CI's oldest line proves (README > Blender versions); blender_lab keeps upstream's 5.1."""
    manifest = tomllib.loads((REPO_ROOT / "blender_addon" / "blender_manifest.toml").read_text())
    servers = json.loads((PLUGIN_ROOT / "plugin.json").read_text())["extensions"]["com.nousresearch.hermes"]["servers"]
    floor = manifest["blender_version_min"]
    assert floor == servers["blender"]["requires"]["min_version"] + ".0"
    assert servers["blender_lab"]["requires"]["min_version"] == "5.1"
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert (
        f'"3.11 {floor.rsplit(".", 1)[0]}.' in ci.split("\nLINES=(", 1)[1].split("\n", 1)[0]
    )  # CI runs the floor's line
