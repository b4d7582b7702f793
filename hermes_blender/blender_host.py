"""Entry point that runs INSIDE a Blender process (Blender-as-a-module or `blender -b --python`).

It installs the add-on from a source folder into the private user folder's extension repository, opens a given
.blend (else Blender's start-up scene: the factory one in a new user folder), and hands the rest of the command line
to the add-on's `hermes_bridge` command. Only this module imports bpy, and only when it runs.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

from .collector import paused_then_frozen

REPO_MODULE = "user_default"
"""Blender's own repository for extensions installed from disk: the add-on has the name it has in a user's Blender,
and no repository is made for it (making one loads Blender's online-repository machinery: about 30 ms of a start)."""
EXTENSION_ID = "hermes_bridge"
ADDON_MODULE = f"bl_ext.{REPO_MODULE}.{EXTENSION_ID}"


PRIVATE_MARK = ".hermes-blender-private"
"""Written by `private_user_folder` in a user folder this toolkit made: only there is the add-on ever linked."""
USER_FOLDER_OVERRIDES = (
    "BLENDER_USER_CONFIG",
    "BLENDER_USER_SCRIPTS",
    "BLENDER_USER_EXTENSIONS",
    "BLENDER_USER_DATAFILES",
)
"""Blender's settings that move one part of the user folder elsewhere: a child given a private BLENDER_USER_RESOURCES
must not inherit them, or that part (the extensions, the bridge's log and checkpoints) would be the user's own."""


def private_user_folder(folder: Path) -> Path:
    """Make `folder` a throw-away Blender user folder of this toolkit's (owner-only, marked as such), to be named by
    BLENDER_USER_RESOURCES before bpy is imported."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    (folder / PRIVATE_MARK).touch()
    return folder


def enable_extension(source: Path) -> ModuleType:
    """Install `source` as extension `hermes_bridge` in the private user folder's default repository and enable it.

    The private folder is BLENDER_USER_RESOURCES, made by `private_user_folder` before bpy is imported. A variable a
    user set for their own Blender folder (a portable set-up) holds no mark, and the repository's folder must lie
    inside the marked one (bpy started in another folder, or BLENDER_USER_EXTENSIONS moving the repositories, would
    put it in the user's own): anything else is refused before a file is touched. Inside it, whatever stands at the
    add-on's place is replaced. The add-on bundles no wheels (tests/e2e/test_addon_package.py holds its manifest to
    none), so Blender's refresh of wheels and compatibility, which loads its online-repository machinery, is
    skipped, and the manifest's Blender floor is checked here instead.
    """
    private = os.environ.get("BLENDER_USER_RESOURCES")
    if not private or not (Path(private) / PRIVATE_MARK).is_file():
        raise RuntimeError(
            "BLENDER_USER_RESOURCES must name a private folder this toolkit made (private_user_folder) before bpy is "
            "imported: the add-on is linked into it, never into a user's own Blender folder"
        )
    import bpy  # first: it puts Blender's own modules, addon_utils and bl_ext, on the path

    # isort: split
    import addon_utils

    # where the repository's package imports from: the folder of the user folder bpy started with
    folder = Path(importlib.import_module(f"bl_ext.{REPO_MODULE}").__path__[0]).resolve()
    if not folder.is_relative_to(Path(private).resolve()):
        raise RuntimeError(
            f"Blender imports extensions from {folder}, outside BLENDER_USER_RESOURCES ({private}): bpy was started "
            "with another user folder, or BLENDER_USER_EXTENSIONS moves it; the add-on is not linked there"
        )
    _check_floor(source, bpy.app.version)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / EXTENSION_ID
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)  # a copy, maybe of an older add-on
    elif target.exists() or target.is_symlink():
        target.unlink()  # a link to this or another checkout, left in a folder used before: made anew
    try:
        target.symlink_to(source.resolve(), target_is_directory=True)
    except OSError:  # Windows without symlink rights
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    addon_utils.enable(ADDON_MODULE, default_set=True, refresh_handled=True, handle_error=_raise)
    return importlib.import_module(ADDON_MODULE)


def _check_floor(source: Path, version: tuple[int, ...]) -> None:
    """Refuse a Blender older than the manifest's `blender_version_min`, as Blender's own refresh would."""
    import tomllib

    floor = tomllib.loads((source / "blender_manifest.toml").read_text(encoding="utf-8"))["blender_version_min"]
    if tuple(version) < tuple(int(part) for part in floor.split(".")):
        raise RuntimeError(
            f"Blender {'.'.join(map(str, version))} is older than the add-on's floor, {floor}: use a newer bpy"
        )


def _raise(exc: BaseException) -> None:
    raise exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hermes_blender.blender_host")
    parser.add_argument("--addon-source", type=Path, required=True)
    parser.add_argument("--blend", type=Path, default=None)
    args, rest = parser.parse_known_args(argv)
    if rest[:1] == ["--"]:
        rest = rest[1:]

    with paused_then_frozen():
        import bpy

        if args.blend is not None:
            bpy.ops.wm.open_mainfile(filepath=str(args.blend))
        # else the scene Blender started on: the factory scene, as the user folder HeadlessBlender makes is new
        enable_extension(args.addon_source)
        cli = importlib.import_module(f"{ADDON_MODULE}.cli")
    try:
        return cli.run(rest)
    finally:  # Blender 4.5 ends only once Python has let go of what holds its data: frozen, it never did (hung)
        gc.unfreeze()


if __name__ == "__main__":
    sys.exit(main())
