"""Folders the toolkit writes its own files into (an answer's pictures, a log), opened and judged as held.

A path checked and then written can be swapped in between: another user plants a link, and a root shell that kept
that user's HOME (`sudo -E`) writes, and chmods, whatever the link names. So a folder is reached from the root one
name at a time without following a link the way's owners did not make, judged by `fstat` of what was opened, and
its files are made through its descriptor, so nothing swapped after that reaches them. The rules are the bridge's
own (blender_addon/owner_files/folders.py), which this package cannot import: the wheel ships the add-on as data.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import UnsafeFolder
from .protocol import addon_module

others_may_write = addon_module("owner_files/folders.py", "folders").others_may_write
"""Whether another user may change what is in a held folder: the add-on's own rule, one file for both sides."""

HELD = hasattr(os, "O_DIRECTORY") and hasattr(os, "O_NOFOLLOW") and os.open in os.supports_dir_fd
"""Folders can be opened one name at a time without following links (POSIX; on Windows the profile's access lists
keep other users out, and these rules are not asked)."""

_FOLDER = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_MAX_LINKS = 40
"""Links followed on the way at most, as the kernel's own limit (ELOOP)."""


def hold_folder(folder: Path, *, judge_way: bool, private: bool = False) -> int | None:
    """An open descriptor of `folder`, made (0700) with what is missing on the way; None where folders cannot be
    held (Windows: made, not judged). Raises UnsafeFolder, saying why.

    The folder itself must not be a link, must be this user's, and nobody else may change what is in it. With
    `judge_way`, so must every folder on the way be this user's or root's, nobody else able to rename its entries
    (a sticky one such as /tmp may be on the way), and a link on the way is followed only when this user or root
    made it; without, the way is the path the user gave. `private`: the folder is made 0700 if it was not.
    """
    if not HELD:
        folder.mkdir(parents=True, exist_ok=True)
        return None
    pending = list(reversed(Path(os.path.abspath(folder)).parts[1:]))
    fd, here, links = os.open("/", _FOLDER), Path("/"), 0
    try:
        while pending:
            part = pending.pop()
            if judge_way:
                _judge_way(fd, here, folder)
            target = _link_to_follow(fd, part, here / part, folder, last=not pending, judge_way=judge_way)
            if target is None:
                fd, here = _replace(fd, _enter(fd, part)), here.parent if part == ".." else here / part
                continue
            links += 1
            if links > _MAX_LINKS:
                raise UnsafeFolder(f"{folder}: too many links on the way")
            if target.is_absolute():
                fd, here = _replace(fd, os.open("/", _FOLDER)), Path("/")
            pending.extend(reversed(target.parts[1:] if target.is_absolute() else target.parts))
        _judge_own(fd, folder, private=private)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _replace(held: int, new: int) -> int:
    """`new`, once `held` is closed (the walk holds one folder at a time; a failure to open leaves it held)."""
    os.close(held)
    return new


def _enter(parent: int, name: str) -> int:
    """The folder `name` in the held folder `parent`, made 0700 when missing."""
    try:
        return os.open(name, _FOLDER, dir_fd=parent)
    except FileNotFoundError:
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
        except FileExistsError:
            pass  # made meanwhile: judged like any other once opened
        return os.open(name, _FOLDER, dir_fd=parent)


def _link_to_follow(parent: int, name: str, path: Path, folder: Path, *, last: bool, judge_way: bool) -> Path | None:
    """What the link `name` in the held folder names, when it is one to follow; None when `name` is no link."""
    try:
        status = os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        return None
    if not stat.S_ISLNK(status.st_mode):
        return None
    if last:
        raise UnsafeFolder(
            f"{folder} is a symbolic link, and the toolkit never writes through one: give the folder it names"
        )
    if judge_way and status.st_uid not in (os.geteuid(), 0):
        raise UnsafeFolder(f"{path} (on the way to {folder}) is a link of another user (uid {status.st_uid})")
    return Path(os.readlink(name, dir_fd=parent))


def _judge_way(fd: int, here: Path, folder: Path) -> None:
    found = os.fstat(fd)
    why = others_may_write(found, fd)
    if why is not None:
        raise UnsafeFolder(f"{here} (on the way to {folder}) is not safe: {why}")


def _judge_own(fd: int, folder: Path, *, private: bool) -> None:
    found = os.fstat(fd)
    me = os.geteuid()
    if found.st_uid != me:
        raise UnsafeFolder(f"{folder} belongs to uid {found.st_uid}, not to this user (uid {me})")
    why = others_may_write(found, fd)
    if why is not None:
        raise UnsafeFolder(f"{folder} is not safe: {why}")
    if private and stat.S_IMODE(found.st_mode) != 0o700:
        os.fchmod(fd, 0o700)
