"""One version: hermes_blender/__init__.py's, held equal everywhere a user, a packager or Blender reads one."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib

from tests.conftest import PLUGIN_ROOT, REPO_ROOT, VERSION

# Read as text: importing service.py would import bpy into the agent-side tests.
ADDON_VERSION = re.search(
    r'^ADDON_VERSION = "([^"]+)"$', (REPO_ROOT / "blender_addon" / "service.py").read_text(), re.M
)


def test_every_copy_of_the_version_equals_the_packages() -> None:
    manifest = tomllib.loads((REPO_ROOT / "blender_addon" / "blender_manifest.toml").read_text())
    plugin = json.loads((PLUGIN_ROOT / "plugin.json").read_text())
    assert {
        "installed metadata": importlib.metadata.version("hermes-blender"),
        "manifest": manifest["version"],
        "plugin.json": plugin["version"],
        "add-on": ADDON_VERSION and ADDON_VERSION[1],
    } == {
        "installed metadata": VERSION,
        "manifest": VERSION,
        "plugin.json": VERSION,
        "add-on": VERSION,
    }


def test_the_readme_names_the_zip_of_this_version() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"hermes_bridge-{VERSION}.zip" in readme
    assert not [name for name in re.findall(r"hermes_bridge-([0-9.]+)\.zip", readme) if name != VERSION]


def test_the_command_prints_the_version() -> None:
    run = subprocess.run([sys.executable, "-m", "hermes_blender.cli", "--version"], capture_output=True, text=True)
    assert run.returncode == 0 and re.fullmatch(rf"hermes-blender {re.escape(VERSION)}\s*", run.stdout)


def test_the_public_surface_resolves_every_name_it_promises() -> None:
    import hermes_blender

    assert all(getattr(hermes_blender, name) is not None for name in hermes_blender.__all__)
    assert issubclass(hermes_blender.LiveEndpointUnavailable, hermes_blender.BlenderBridgeError)
