"""The runtime file (`server.json`) that tells agents where this Blender's bridge lives.

The agent trusts only this file, never a configured URL, so it must be exact: written only
after the listener is bound, replaced atomically, readable by the owner alone, and removed
only by the process it names.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Hermes reads ONE liveness path on every OS and expands %VAR% only on Windows, so the
# declared string is written with `~`: %LOCALAPPDATA%\Blender\server.json on Windows and a
# working path on macOS and Linux. plugin.json declares the same string (a test holds it).
DECLARED_PATH = "~/AppData/Local/Blender/server.json"
URL_FIELD = "http"
TOKEN_FIELD = "token"
PID_FIELD = "pid"


def expand_declared_path(declared: str = DECLARED_PATH) -> Path:
    """Expand the declared path the way Hermes does: `~` and `$VAR` everywhere, `%VAR%` on Windows."""
    return Path(os.path.expanduser(os.path.expandvars(declared)))


@dataclass(frozen=True)
class Publication:
    """What publishing found and did."""

    path: Path
    replaced_pid: int | None = None
    """A pid named by the previous file, if any."""
    replaced_live: bool = False
    """True when that pid was a live process: another bridge was taken over (newest wins)."""


def publish(path: Path, *, url: str, token: str, pid: int, extra: dict[str, Any] | None = None) -> Publication:
    """Write the runtime file atomically with owner-only permissions."""
    previous = _read_pid(path)
    record: dict[str, Any] = {**(extra or {}), URL_FIELD: url, TOKEN_FIELD: token, PID_FIELD: pid}
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _owner_only_folder(path.parent)
    fd, temp_name = tempfile.mkstemp(prefix=".server-", suffix=".json.tmp", dir=path.parent)  # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(record, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    if previous is None or previous == pid:
        return Publication(path)
    return Publication(path, replaced_pid=previous, replaced_live=pid_alive(previous))


def _owner_only_folder(folder: Path) -> None:
    """Make an existing folder of ours 0700 too: others could otherwise list it, or swap the file.

    A shared sticky folder (such as /tmp) and a folder of another user are left as they are.
    """
    if sys.platform == "win32":
        return  # ACLs, not mode bits, protect %LOCALAPPDATA%, which is private to the user already
    info = folder.stat()
    if info.st_uid == os.geteuid() and not info.st_mode & stat.S_ISVTX and stat.S_IMODE(info.st_mode) != 0o700:
        folder.chmod(0o700)


def withdraw(path: Path, *, url: str, pid: int) -> bool:
    """Remove the file only if it still names this process and this endpoint."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(record, dict) or record.get(PID_FIELD) != pid or record.get(URL_FIELD) != url:
        return False
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return True


def _read_pid(path: Path) -> int | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    pid = record.get(PID_FIELD) if isinstance(record, dict) else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (the standard library only; Blender has no psutil)."""
    if pid <= 0:
        return False
    if sys.platform == "win32":
        return _windows_pid_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, it just belongs to someone else
    return True


def _windows_pid_alive(pid: int) -> bool:
    import ctypes

    process_query_limited_information = 0x1000
    still_active = 259
    kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
    handle = kernel32.OpenProcess(process_query_limited_information, False, pid)
    if not handle:
        return False
    try:
        code = ctypes.c_ulong()
        if kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return code.value == still_active
        return True
    finally:
        kernel32.CloseHandle(handle)
