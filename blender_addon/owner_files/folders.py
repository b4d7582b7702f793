"""Whose a folder is: the rules that say whether another OS user may change what the bridge writes in it.

Loopback and the disk are shared by every OS user, root included. The bridge writes its log and checkpoints only
into a folder that its own user owns and nobody else may write, reached from the root one name at a time without
following a link (a root shell that kept a user's HOME would otherwise write, and chmod, through links that user
planted). A render's output folder may be any folder nobody else may change (a sticky one such as /tmp too).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

HELD = hasattr(os, "O_DIRECTORY") and hasattr(os, "O_NOFOLLOW") and os.open in os.supports_dir_fd
"""Folders can be opened one name at a time without following links (POSIX; on Windows the profile's access lists
keep other users out, and these rules are not asked)."""
_FOLDER = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)


class NotOwnFolder(Exception):
    """A folder the bridge will not write its own files into; the message says why, in words."""


MAX_LINKS = 40
"""Links followed on the way to one folder at most (the kernel's own bound)."""


def own_folder(folder: Path, *, create: bool = True, private: bool = True) -> bool:
    """Check that only this process's user can change `folder` (absolute), making what is missing (0700) when
    `create`. Each folder on the way is this user's or root's and nobody else may rename its entries (a sticky one
    such as /tmp may be on the way); a link on the way is followed only if this user or root made it (it sits in a
    folder nobody else may change, so nobody can swap it later); the folder itself is this user's, neither shared
    (sticky) nor writable by others, and made 0700. False: it does not exist and `create` is false. Raises
    NotOwnFolder, saying why. Not `private`: a folder that was there keeps its mode (only judged)."""
    if not folder.is_absolute():
        raise NotOwnFolder(f"{folder} is not an absolute path")
    if not HELD:
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        return folder.is_dir()
    path = folder
    for _ in range(MAX_LINKS):
        try:
            return _walk(path, folder, create=create, private=private)
        except _TrustedLink as link:
            path = link.target
    raise NotOwnFolder(f"more than {MAX_LINKS} links on the way to {folder}")


class _TrustedLink(Exception):
    """A link this user or root made, on the way: the walk starts again along it."""

    def __init__(self, target: Path) -> None:
        self.target = target


def _walk(path: Path, folder: Path, *, create: bool, private: bool = True) -> bool:
    me = os.geteuid()
    fd: int | None = os.open(path.anchor, _FOLDER)
    here = Path(path.anchor)
    parts = path.parts[1:]
    try:
        for index, part in enumerate(parts):
            assert fd is not None
            found = os.fstat(fd)
            if found.st_uid not in (me, 0) or (why := others_may_write(found, fd)) is not None:
                owner = "root" if found.st_uid == 0 else f"uid {found.st_uid}"
                why = why or "it belongs to another user"
                raise NotOwnFolder(f"{here} (on the way to {folder}, owned by {owner}) is not safe: {why}")
            parent, fd = fd, None
            fd = _enter(parent, part, here, parts[index + 1 :], create=create)
            here = here / part
            if fd is None:
                return False
        assert fd is not None
        found = os.fstat(fd)
        if found.st_uid != me:
            raise NotOwnFolder(f"{folder} belongs to another user (uid {found.st_uid}), not this process's (uid {me})")
        if found.st_mode & stat.S_ISVTX:
            raise NotOwnFolder(f"{folder} is a shared folder (sticky, such as /tmp): name a folder of its own in it")
        if (why := others_may_write(found, fd)) is not None:
            raise NotOwnFolder(f"{folder} is not the bridge's own: {why}")
        if private and stat.S_IMODE(found.st_mode) != 0o700:
            os.fchmod(fd, 0o700)  # nobody else may write it: made unreadable to them too
        return True
    finally:
        if fd is not None:
            os.close(fd)


def _enter(parent: int, name: str, here: Path, rest: tuple[str, ...], *, create: bool) -> int | None:
    """The folder `name` in the held folder `here` (`parent`), opened without following a link (made 0700 when
    missing and `create`; None when missing and not); `parent` is closed either way. A link this user or root made
    raises _TrustedLink with the path to walk instead (its target, then `rest`); anyone else's, NotOwnFolder."""
    try:
        try:
            return os.open(name, _FOLDER, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
            os.mkdir(name, 0o700, dir_fd=parent)  # nobody else may add names here: checked on the way
            return os.open(name, _FOLDER, dir_fd=parent)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) or not _is_link(name, parent):
            raise
        owner = os.lstat(name, dir_fd=parent).st_uid
        if owner not in (os.geteuid(), 0):
            raise NotOwnFolder(
                f"{here / name} is a link another user (uid {owner}) made; the bridge never writes through it"
            ) from None
        target = Path(os.readlink(name, dir_fd=parent))
        raise _TrustedLink((target if target.is_absolute() else here / target).joinpath(*rest)) from None
    finally:
        os.close(parent)


def _is_link(name: str, parent: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode)
    except OSError:
        return False


def others_may_write(found: os.stat_result, fd: int) -> str | None:
    """Why another user may change what is in the held folder `fd` (its `fstat`), or None."""
    mode, me = found.st_mode, os.geteuid()
    if found.st_uid not in (me, 0):
        return f"it belongs to another user (uid {found.st_uid}), who may change anything in it"
    if mode & stat.S_ISVTX:
        return None  # others may add names (a frame whose name they take is skipped), never touch ours
    if mode & stat.S_IWOTH:
        return "every user may write to it and it has no sticky bit"
    if mode & stat.S_IWGRP:  # with an access list, these bits are its mask: what its named users may do at most
        if _has_access_acl(fd):
            return "an access control list may let other users write to it"
        if _group_has_others(found.st_gid, me):
            return f"its group (gid {found.st_gid}) may write to it and has members other than you"
    return None


def _has_access_acl(fd: int) -> bool:
    """Linux: whether the folder carries a POSIX access ACL (elsewhere, or where the file system keeps none: no)."""
    try:
        return "system.posix_acl_access" in os.listxattr(fd)
    except (AttributeError, OSError):
        return False


def _group_has_others(gid: int, me: int) -> bool:
    """Whether anyone but this user is in group `gid` (a listed member, or an account whose own group it is). A
    group the system cannot name counts as having others. Users only a directory service knows may be missed."""
    import grp  # POSIX only, like every caller
    import pwd

    try:
        listed = set(grp.getgrgid(gid).gr_mem)
    except KeyError:
        return True
    accounts = pwd.getpwall()
    mine = {entry.pw_name for entry in accounts if entry.pw_uid == me}
    return bool(listed - mine) or any(entry.pw_gid == gid and entry.pw_uid != me for entry in accounts)
