"""Entry point that runs INSIDE a Blender process (Blender-as-a-module or `blender -b --python`).

It installs the add-on from a source folder into the private user folder's extension repository, opens a given
.blend (else Blender's start-up scene: the factory one in a new user folder), and hands the rest of the command line
to the add-on's `hermes_bridge` command. Only this module imports bpy, and only when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

REPO_MODULE = "user_default"
"""Blender's own repository for extensions installed from disk: the add-on has the name it has in a user's Blender,
and no repository is made for it (making one loads Blender's online-repository machinery: about 30 ms of a start)."""
EXTENSION_ID = "hermes_bridge"
ADDON_MODULE = f"bl_ext.{REPO_MODULE}.{EXTENSION_ID}"


def enable_extension(source: Path) -> ModuleType:
    """Install `source` as extension `hermes_bridge` in the private user folder's default repository and enable it.

    The folder is BLENDER_USER_RESOURCES, which the caller points at a throw-away folder before bpy is imported:
    without it the link would land in the user's own Blender configuration, so that is refused. The add-on bundles
    no wheels (tests/e2e/test_addon_package.py holds its manifest to none) and runs in the bpy the toolkit pins, so
    Blender's refresh of wheels and compatibility is skipped: it too loads the online-repository machinery.
    """
    if not os.environ.get("BLENDER_USER_RESOURCES"):
        raise RuntimeError("BLENDER_USER_RESOURCES must name a private folder before the add-on is linked into it")
    import bpy  # noqa: F401  (first: it puts Blender's own modules, addon_utils and bl_ext, on the path)

    # isort: split
    import addon_utils

    # where the repository's package imports from: the user folder bpy started with (a later change of
    # BLENDER_USER_RESOURCES, as a test run under pytest-blender makes, moves the repository's folder but not this)
    folder = Path(importlib.import_module(f"bl_ext.{REPO_MODULE}").__path__[0])
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / EXTENSION_ID
    if target.is_symlink() and target.resolve() != source.resolve():
        target.unlink()  # a link to another checkout, left in a folder used before
    if not target.exists():
        try:
            target.symlink_to(source.resolve(), target_is_directory=True)
        except OSError:  # Windows without symlink rights
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    addon_utils.enable(ADDON_MODULE, default_set=True, refresh_handled=True, handle_error=_raise)
    return importlib.import_module(ADDON_MODULE)


def _raise(exc: BaseException) -> None:
    raise exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hermes_blender.blender_host")
    parser.add_argument("--addon-source", type=Path, required=True)
    parser.add_argument("--blend", type=Path, default=None)
    args, rest = parser.parse_known_args(argv)
    if rest[:1] == ["--"]:
        rest = rest[1:]

    import bpy

    if args.blend is not None:
        bpy.ops.wm.open_mainfile(filepath=str(args.blend))
    # else the scene Blender started on: the factory scene, as the user folder HeadlessBlender makes is new
    enable_extension(args.addon_source)
    cli = importlib.import_module(f"{ADDON_MODULE}.cli")
    return cli.run(rest)


if __name__ == "__main__":
    sys.exit(main())
