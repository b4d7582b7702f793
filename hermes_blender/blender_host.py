"""Entry point that runs INSIDE a Blender process (Blender-as-a-module or `blender -b --python`).

It installs the add-on from a source folder into a private extension repository, opens the
factory scene or a given .blend, and hands the rest of the command line to the add-on's
`hermes_bridge` command. Only this module imports bpy, and only when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
from pathlib import Path
from types import ModuleType

REPO_MODULE = "hermes_dev"
EXTENSION_ID = "hermes_bridge"
ADDON_MODULE = f"bl_ext.{REPO_MODULE}.{EXTENSION_ID}"


def enable_extension(source: Path, repo_dir: Path) -> ModuleType:
    """Install `source` as extension `hermes_bridge` in a private repository and enable it."""
    import bpy  # first: it puts Blender's own modules (addon_utils, ...) on the path

    # isort: split
    import addon_utils

    repo_dir.mkdir(parents=True, exist_ok=True)
    target = repo_dir / EXTENSION_ID
    if not target.exists():
        try:
            target.symlink_to(source.resolve(), target_is_directory=True)
        except OSError:  # Windows without symlink rights
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    repos = bpy.context.preferences.extensions.repos
    if not any(repo.module == REPO_MODULE for repo in repos):
        repos.new(name="Hermes Bridge (development)", module=REPO_MODULE, custom_directory=str(repo_dir), source="USER")
    addon_utils.enable(ADDON_MODULE, default_set=True, handle_error=_raise)
    return importlib.import_module(ADDON_MODULE)


def _raise(exc: BaseException) -> None:
    raise exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hermes_blender.blender_host")
    parser.add_argument("--addon-source", type=Path, required=True)
    parser.add_argument("--repo-dir", type=Path, required=True)
    parser.add_argument("--blend", type=Path, default=None)
    args, rest = parser.parse_known_args(argv)
    if rest[:1] == ["--"]:
        rest = rest[1:]

    import bpy

    if args.blend is not None:
        bpy.ops.wm.open_mainfile(filepath=str(args.blend))
    else:
        bpy.ops.wm.read_homefile(use_factory_startup=True)
    enable_extension(args.addon_source, args.repo_dir)
    cli = importlib.import_module(f"{ADDON_MODULE}.cli")
    return cli.run(rest)


if __name__ == "__main__":
    sys.exit(main())
