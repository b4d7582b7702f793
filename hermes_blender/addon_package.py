"""Build the extension zip with Blender's own tools, and install it into a Blender.

Blender's extension builder and validator ship inside the bpy wheel and run with plain
Python, so the zip we hand out is the one Blender itself would build and accept.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

from .errors import AddonPackageError
from .resources import ADDON_SOURCE

EXTENSION_ID = "hermes_bridge"
ONE_PREFERENCE = (
    "In Blender: Edit > Preferences > Add-ons > Hermes Bridge: keep 'Start with Blender' on, so the bridge "
    "publishes its endpoint whenever Blender opens (or start it from 3D View > Sidebar > Hermes)."
)
_INSTALL_WITH_BPY = """
import sys, bpy
result = bpy.ops.extensions.package_install_files(filepath=sys.argv[1], repo="user_default", enable_on_install=True)
if "FINISHED" not in result:
    sys.exit("Blender did not install the extension: " + str(result))
bpy.ops.wm.save_userpref()
"""


def extension_tool() -> Path:
    """Blender's `blender_ext.py` from the installed bpy wheel."""
    spec = importlib.util.find_spec("bpy")
    if spec is None or not spec.submodule_search_locations:
        raise AddonPackageError(
            "Blender's extension builder ships inside bpy, which is not installed here: install "
            "'hermes-blender[blender]' (Python 3.13), or run `uv run hermes-blender build-addon` in a checkout"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(root.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    if not found:
        raise AddonPackageError(f"Blender's extension tool was not found inside {root}")
    return found[-1]


def _run(command: list[str], what: str, timeout: float = 300.0) -> str:
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        raise AddonPackageError(f"{what} could not run: {exc}") from None
    output = (run.stdout + run.stderr).strip()
    if run.returncode != 0 or "FATAL_ERROR" in output:
        raise AddonPackageError(f"{what} failed:\n{output}")
    return output


def build_addon(output_dir: Path) -> Path:
    """Build and validate the zip; return its path."""
    tool = extension_tool()
    output_dir.mkdir(parents=True, exist_ok=True)
    _run(
        [sys.executable, str(tool), "build", "--source-dir", str(ADDON_SOURCE), "--output-dir", str(output_dir)],
        "Blender's extension builder",
    )
    built = sorted(output_dir.glob(f"{EXTENSION_ID}-*.zip"), key=lambda p: p.stat().st_mtime)
    if not built:
        raise AddonPackageError(f"the builder reported success but wrote no {EXTENSION_ID}-*.zip in {output_dir}")
    _run([sys.executable, str(tool), "validate", str(built[-1])], "Blender's extension validator")
    return built[-1]


def install_addon(blender: Path | None, package: Path | None = None) -> Path:
    """Install (and enable) the extension in a real Blender when given, else in the bundled bpy."""
    with tempfile.TemporaryDirectory(prefix="hermes-addon-") as folder:
        zip_path = package or build_addon(Path(folder))
        if blender is not None:
            if not blender.is_file():
                raise AddonPackageError(f"no Blender executable at {blender}")
            _run(
                [
                    str(blender),
                    "--command",
                    "extension",
                    "install-file",
                    "--repo",
                    "user_default",
                    "--enable",
                    str(zip_path),
                ],
                f"{blender} (extension install-file)",
            )
        else:
            _run([sys.executable, "-c", _INSTALL_WITH_BPY, str(zip_path)], "the bundled Blender (bpy)")
        return zip_path
