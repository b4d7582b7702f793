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


def own_folder(folder: Path, *, create: bool = True) -> bool:
    """Check that only this process's user can change `folder` (absolute), making what is missing (0700) when
    `create`: each folder on the way is this user's or root's and nobody else may rename its entries (a sticky one
    such as /tmp may be on the way), the folder itself is this user's and made 0700, and no name on the way is a
    link. False: it does not exist and `create` is false. Raises NotOwnFolder, saying why."""
    if not HELD:
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        return folder.is_dir()
    me = os.geteuid()
    fd: int | None = os.open(folder.anchor, _FOLDER)
    here = Path(folder.anchor)
    try:
        for part in folder.parts[1:]:
            assert fd is not None
            found = os.fstat(fd)
            if found.st_uid not in (me, 0) or (why := others_may_write(found, fd)) is not None:
                owner = "root" if found.st_uid == 0 else f"uid {found.st_uid}"
                why = why or "it belongs to another user"
                raise NotOwnFolder(f"{here} (on the way to {folder}, owned by {owner}) is not safe: {why}")
            here = here / part
            parent, fd = fd, None
            fd = _enter(parent, part, here, create=create)
            if fd is None:
                return False
        assert fd is not None
        found = os.fstat(fd)
        if found.st_uid != me:
            raise NotOwnFolder(f"{folder} belongs to another user (uid {found.st_uid}), not this process's (uid {me})")
        if stat.S_IMODE(found.st_mode) != 0o700:
            os.fchmod(fd, 0o700)  # ours: others could otherwise list it, or (group-writable) swap a file in it
        return True
    finally:
        if fd is not None:
            os.close(fd)


def _enter(parent: int, name: str, path: Path, *, create: bool) -> int | None:
    """The folder `name` in the held folder `parent`, opened without following a link (made 0700 when missing and
    `create`; None when missing and not); `parent` is closed either way."""
    try:
        try:
            return os.open(name, _FOLDER, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
            os.mkdir(name, 0o700, dir_fd=parent)  # nobody else may add names here: checked on the way
            return os.open(name, _FOLDER, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and _is_link(name, parent):
            raise NotOwnFolder(f"{path} is a link; the bridge never writes through a link") from None
        raise
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
