"""What makes the bridge's files and folders owner-only on POSIX (Windows: the user's profile ACLs)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path


def owner_only_folder(folder: Path) -> None:
    """Make an existing folder of ours 0700: others could otherwise list it, or swap a file in it.

    A shared sticky folder (such as /tmp) and a folder of another user are left as they are.
    """
    if sys.platform == "win32":
        return  # ACLs, not mode bits, protect %LOCALAPPDATA% and %APPDATA%, private to the user already
    info = folder.stat()
    if info.st_uid == os.geteuid() and not info.st_mode & stat.S_ISVTX and stat.S_IMODE(info.st_mode) != 0o700:
        folder.chmod(0o700)


def open_owner_only_for_append(path: Path | str) -> int:
    """A descriptor appending to `path`, created 0600, and made 0600 if an older version or another umask left it
    readable by others; never through a link (ELOOP), so a link planted there is no way to another file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
    if sys.platform != "win32":
        found = os.fstat(fd)
        if found.st_uid != os.geteuid() or found.st_nlink != 1 or not stat.S_ISREG(found.st_mode):
            os.close(fd)  # another user's file, or a hard link to one: never appended to nor chmodded
            raise PermissionError(f"{path} is not a file of this user's alone; it is left untouched")
        os.fchmod(fd, 0o600)
    return fd
