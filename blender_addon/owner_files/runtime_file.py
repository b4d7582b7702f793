"""The runtime file (`server.json`) that tells agents where this Blender's bridge lives.

The agent trusts only this file, never a configured URL, so it must be exact: written only
after the listener is bound, replaced atomically, readable by the owner alone, and removed
only by the process it names.

Several Blenders may serve at once. Each also publishes a record of its own,
`servers/<pid>.json` beside the runtime file, under the same rules; `server.json` names the
newest, and when that one stops it hands the file to the newest bridge still running.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

from .permissions import owner_only_folder

# Hermes reads ONE liveness path on every OS and expands %VAR% only on Windows, so the
# declared string is written with `~`: %LOCALAPPDATA%\Blender\server.json on Windows and a
# working path on macOS and Linux. plugin.json declares the same string (a test holds it).
DECLARED_PATH = "~/AppData/Local/Blender/server.json"
URL_FIELD = "http"
TOKEN_FIELD = "token"
PID_FIELD = "pid"
PUBLISHED_FIELD = "published_ns"
"""When the bridge published (ns since the epoch): which record is the newest."""
INSTANCES_FOLDER = "servers"
LAB_FOLDER = "lab"
"""Beside the runtime file, the Blender Lab listener's own (`lab/server.json`): published while that listener runs
and withdrawn with it, so the plugin's `blender_lab` server is offered only then (its liveness names this file)."""
DECLARED_LAB_PATH = f"~/AppData/Local/Blender/{LAB_FOLDER}/server.json"


def lab_path(path: Path) -> Path:
    """The Lab listener's runtime file beside the runtime file `path`."""
    return path.parent / LAB_FOLDER / path.name


def expand_declared_path(declared: str = DECLARED_PATH) -> Path:
    """Expand the declared path the way Hermes does: `~` and `$VAR` everywhere, `%VAR%` on Windows."""
    return Path(os.path.expanduser(os.path.expandvars(declared)))


class Publication:
    """What publishing found and did."""

    __slots__ = ("path", "replaced_pid", "replaced_live")

    def __init__(self, path: Path, replaced_pid: int | None = None, replaced_live: bool = False) -> None:
        self.path = path
        self.replaced_pid = replaced_pid
        """A pid named by the previous file, if any."""
        self.replaced_live = replaced_live
        """True when that pid was a live process: another bridge was taken over (newest wins)."""


def publish(path: Path, *, url: str, token: str, pid: int, extra: dict[str, Any] | None = None) -> Publication:
    """Write this bridge's own record, then the runtime file, atomically and owner-only."""
    previous = named_pid(path)
    record: dict[str, Any] = {
        **(extra or {}),
        PUBLISHED_FIELD: time.time_ns(),
        URL_FIELD: url,
        TOKEN_FIELD: token,
        PID_FIELD: pid,
    }
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    owner_only_folder(path.parent)
    own = instance_path(path, pid)
    own.parent.mkdir(exist_ok=True, mode=0o700)
    owner_only_folder(own.parent)
    _forget_dead_instances(own.parent)
    _write(own, record)
    try:
        _write(path, record)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(own)
        raise
    if previous is None or previous == pid:
        return Publication(path)
    return Publication(path, replaced_pid=previous, replaced_live=pid_alive(previous))


def instance_path(path: Path, pid: int) -> Path:
    """The record a bridge keeps for itself, whichever bridge `server.json` names."""
    return path.parent / INSTANCES_FOLDER / f"{pid}.json"


def live_instances(path: Path) -> list[dict[str, Any]]:
    """The records of running bridges beside this runtime file, newest first."""
    records = []
    for candidate in (path.parent / INSTANCES_FOLDER).glob("*.json"):
        record = read_record(candidate)
        if record is not None and _names_itself(record, candidate) and pid_alive(record[PID_FIELD]):
            records.append(record)
    return sorted(records, key=lambda record: record.get(PUBLISHED_FIELD, 0), reverse=True)


def _names_itself(record: dict[str, Any], where: Path) -> bool:
    pid = record.get(PID_FIELD)
    return isinstance(pid, int) and not isinstance(pid, bool) and where.name == f"{pid}.json"


def _forget_dead_instances(folder: Path) -> None:
    """A crashed bridge never withdraws its record; drop those whose process is gone, before its pid is reused."""
    for candidate in folder.glob("*.json"):
        record = read_record(candidate)
        if record is not None and _names_itself(record, candidate) and not pid_alive(record[PID_FIELD]):
            with contextlib.suppress(OSError):
                os.unlink(candidate)


_NEW_TEMP = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
"""A temporary file made new and owner-only, never through a link: what `tempfile.mkstemp` opens, without loading
`tempfile` and `random` at every Blender start (1.5 ms)."""


def _write(path: Path, record: dict[str, Any], *, over: bool = True) -> None:
    """Atomic and owner-only; with `over=False`, raises FileExistsError rather than replace a file."""
    temp_name = str(path.parent / f".server-{os.urandom(8).hex()}.json.tmp")
    fd = os.open(temp_name, _NEW_TEMP, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(record, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        if over:
            os.replace(temp_name, path)
        else:
            _place_new(temp_name, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)


def withdraw(path: Path, *, url: str, pid: int) -> bool:
    """Remove this bridge's records; if the runtime file named it, hand the file to the newest live bridge.

    Returns whether the runtime file was ours. The file is first moved aside atomically and
    judged there, so a newer bridge that publishes between the check and the removal never
    loses its file: one that is not ours goes back, unless a newer one has already taken its place.
    """
    own = instance_path(path, pid)
    if _is(read_record(own), url, pid):
        with contextlib.suppress(OSError):
            os.unlink(own)
    aside = path.with_name(f".{path.name}.{os.getpid()}.withdrawing")
    try:
        os.replace(path, aside)
    except OSError:
        return False
    ours = _is(read_record(aside), url, pid)
    if not ours:
        with contextlib.suppress(OSError):
            _place_new(str(aside), path)  # fails if a newer file is there already: then that one stays
    with contextlib.suppress(OSError):
        os.unlink(aside)
    if ours:
        _promote(path)
    return ours


def _place_new(source: str, path: Path) -> None:
    """Give `source`'s file the name `path` unless that name exists (FileExistsError then).

    A hard link does it atomically. A file system without them (FAT, exFAT, some network shares) gets a
    rename when the name is free: a bridge publishing in the instant between the look and the rename loses
    its file to the one we put back, which its next start repairs; removing another live Blender's file, as
    dropping `source` would, has no such repair.
    """
    try:
        os.link(source, path)
        return
    except FileExistsError:
        raise
    except OSError:
        if os.path.lexists(path):
            raise FileExistsError(path) from None
    os.replace(source, path)


def _is(record: dict[str, Any] | None, url: str, pid: int) -> bool:
    return record is not None and record.get(PID_FIELD) == pid and record.get(URL_FIELD) == url


def _promote(path: Path) -> None:
    """Name the newest bridge still running in the runtime file, unless another has published meanwhile."""
    newest = next(iter(live_instances(path)), None)
    if newest is None:
        return
    try:
        _write(path, newest, over=False)  # never over a file a newer bridge has just written
    except FileExistsError:
        return
    if not instance_path(path, newest[PID_FIELD]).exists():
        # It stopped while we promoted it and may have missed the file: withdraw it for it (the next one is promoted).
        withdraw(path, url=newest.get(URL_FIELD, ""), pid=newest[PID_FIELD])


def named_pid(path: Path) -> int | None:
    """The pid the runtime file names now (the Blender agents connect to), if any."""
    record = read_record(path)
    pid = record.get(PID_FIELD) if record is not None else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


MAX_BYTES = 64 * 1024


def read_record(path: Path) -> dict[str, Any] | None:
    """A JSON object of ours, whatever is at the path, read safely: Blender's start (and the checkpoints' panel) runs
    on the main thread in the GUI, so a FIFO, /dev/zero, a huge or deeply nested file must read as "no record",
    never hang or blow up."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_BYTES + 1)
        record = json.loads(data) if len(data) <= MAX_BYTES else None
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
    return record if isinstance(record, dict) else None


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
