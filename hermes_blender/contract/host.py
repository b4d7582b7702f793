"""Host facts (I/O): the operating system, environment, registry, plists, processes, sessions.

Everything the contract needs to know about this machine comes through `HostFacts`, so the
policy stays pure and tests state a host (temp dirs, a fake registry or plist reader)
instead of needing one.
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
import struct
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psutil

_POSIX_VAR = re.compile(r"\$(\w+)|\$\{(\w+)\}")
_WINDOWS_VAR = re.compile(r"%([^%]+)%")
_VS_FIXEDFILEINFO_SIGNATURE = b"\xbd\x04\xef\xfe"


@dataclass(frozen=True)
class RegistryEntry:
    """One Windows "Uninstall" entry."""

    display_name: str
    display_version: str | None = None
    install_location: str | None = None


def _host_os() -> str:
    return sys.platform if sys.platform in ("win32", "darwin") else "linux"


def _pid_alive(pid: int) -> bool:
    """As Hermes judges it: on POSIX signal 0, "no such process" dead and "permission denied" alive (psutil also
    read /proc/<pid>/status, 20-50 µs of every relayed call); on Windows a process open to a limited query."""
    if pid <= 0:
        return False  # signal 0 to pid 0 or below reaches a process group
    if sys.platform == "win32":
        import psutil  # loaded where a pid is looked at: a stdio server's `initialize` answer never needs it

        return psutil.pid_exists(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def account_home() -> str | None:
    """The account's home folder from the user database: a launcher that passes a bare environment has no HOME,
    and a `~` left unexpanded would be read relative to whatever folder the process was started in."""
    if sys.platform == "win32":
        return None  # USERPROFILE is the only source Hermes and Blender use there
    import pwd

    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return None
    return home if home.startswith("/") else None


def _read_plist(path: Path) -> Mapping[str, Any]:
    import plistlib  # macOS's app bundles only

    with path.open("rb") as handle:
        return plistlib.load(handle)


def read_pe_version(path: Path) -> str | None:
    """The fixed file version (a.b.c.d) of a Windows executable, read from its bytes."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    at = data.find(_VS_FIXEDFILEINFO_SIGNATURE)
    if at < 0 or len(data) < at + 16:
        return None
    _signature, _struct_version, ms, ls = struct.unpack_from("<IIII", data, at)
    return f"{ms >> 16}.{ms & 0xFFFF}.{ls >> 16}.{ls & 0xFFFF}"


def _windows_uninstall_entries() -> Sequence[RegistryEntry]:
    if sys.platform != "win32":
        return ()
    import winreg

    roots = (
        (winreg.HKEY_LOCAL_MACHINE, r"SOFTWARE\Microsoft\Windows\CurrentVersion\Uninstall"),
        (winreg.HKEY_LOCAL_MACHINE, r"SOFTWARE\WOW6432Node\Microsoft\Windows\CurrentVersion\Uninstall"),
        (winreg.HKEY_CURRENT_USER, r"SOFTWARE\Microsoft\Windows\CurrentVersion\Uninstall"),
    )
    entries: list[RegistryEntry] = []
    for hive, key_path in roots:
        try:
            root = winreg.OpenKey(hive, key_path)
        except OSError:
            continue
        with root:
            index = 0
            while True:
                try:
                    name = winreg.EnumKey(root, index)
                except OSError:
                    break
                index += 1
                try:
                    with winreg.OpenKey(root, name) as sub:
                        values = {}
                        for value_name in ("DisplayName", "DisplayVersion", "InstallLocation"):
                            try:
                                values[value_name] = str(winreg.QueryValueEx(sub, value_name)[0])
                            except OSError:
                                values[value_name] = None
                except OSError:
                    continue
                if values["DisplayName"]:
                    entries.append(
                        RegistryEntry(values["DisplayName"], values["DisplayVersion"], values["InstallLocation"])
                    )
    return entries


def _interactive_session() -> bool:
    """Whether this process runs in a graphical login session (Hermes's per-OS checks)."""
    if sys.platform == "win32":
        return _windows_interactive_session()
    if sys.platform == "darwin":
        return True  # no subprocess-free way to ask; Hermes assumes yes
    return linux_interactive_session(Path("/"), os.getuid())


def linux_interactive_session(root: Path, uid: int) -> bool:
    """Hermes's Linux rule: a login session id (not the unset 4294967295) and a /run/user/<uid> folder."""
    try:
        session = (root / "proc/self/sessionid").read_text().strip()
    except OSError:
        return False
    return bool(session) and session != "4294967295" and (root / f"run/user/{uid}").is_dir()


def _windows_interactive_session() -> bool:
    import ctypes

    try:
        kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
        session = ctypes.c_ulong()
        if not kernel32.ProcessIdToSessionId(kernel32.GetCurrentProcessId(), ctypes.byref(session)):
            return False
        if session.value == 0:
            return False
        if session.value == kernel32.WTSGetActiveConsoleSessionId():
            return True
        return bool(ctypes.windll.user32.GetProcessWindowStation())  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return False


@dataclass(frozen=True)
class HostFacts:
    os: str = field(default_factory=_host_os)
    """Hermes's OS keys: win32, darwin or linux."""
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    pid_alive: Callable[[int], bool] = _pid_alive
    uninstall_entries: Callable[[], Sequence[RegistryEntry]] = _windows_uninstall_entries
    read_plist: Callable[[Path], Mapping[str, Any]] = _read_plist
    read_pe_version: Callable[[Path], str | None] = read_pe_version
    interactive_session: Callable[[], bool] = _interactive_session
    account_home: Callable[[], str | None] = account_home
    system_root: Path = Path("/")
    """Where system-wide install folders are looked up (/Applications, Flatpak, Snap); tests point it elsewhere."""

    def home(self) -> str | None:
        """The environment's home, else the account's (as Python's expanduser does); None when there is neither."""
        return (self.env.get("USERPROFILE") if self.os == "win32" else self.env.get("HOME")) or self.account_home()

    def expand(self, text: str) -> str:
        """Expand like Hermes: `~` and `$VAR`/`${VAR}` everywhere, `%VAR%` on Windows; unset stays literal."""
        if self.os == "win32":
            text = _WINDOWS_VAR.sub(lambda m: self.env.get(m.group(1), m.group(0)), text)
        text = _POSIX_VAR.sub(lambda m: self.env.get(m.group(1) or m.group(2), m.group(0)), text)
        if text.startswith("~") and (home := self.home()):
            if len(text) == 1 or text[1] in "/\\":
                text = home + text[1:]
        return text

    def expand_path(self, text: str) -> Path:
        return Path(self.expand(text))


class UntrustedFile(OSError):
    """A file that someone other than this user could have written: what it says is not trusted."""


def untrusted_file_problem(status: os.stat_result) -> str | None:
    """Why a file this user reads for an endpoint could be another user's words (None: it is this user's alone).

    Windows has no POSIX owner or mode bits here; its per-user AppData folder is the boundary there."""
    if not hasattr(os, "geteuid"):
        return None
    if status.st_uid != os.geteuid():
        return f"belongs to uid {status.st_uid}, not to this user (uid {os.geteuid()})"
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"can be written by other users (mode {stat.S_IMODE(status.st_mode):o})"
    return None


def read_small_file(path: Path, limit: int, *, check: Callable[[os.stat_result], str | None] | None = None) -> bytes:
    """A regular file of at most `limit` bytes, read without blocking: a FIFO, a device such as
    /dev/zero or an endless file at that path is an error, never a hang or a blown-up process.
    `check` judges the opened file itself (not the path, which may be swapped meanwhile): its
    sentence raises UntrustedFile."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # opening a FIFO must not wait for a writer
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(f"{path} is not a regular file")
        if check is not None and (problem := check(status)) is not None:
            raise UntrustedFile(problem)
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise OSError(f"{path} is larger than {limit} bytes")
    return b"".join(chunks)


def is_absolute_text(text: str) -> bool:
    """Absolute on POSIX or Windows, whatever this machine is: a relative path would be read from the working folder."""
    return text.startswith("/") or bool(re.match(r"[A-Za-z]:[\\/]", text))


def serving_blender_problem(pid: int, address: str, port: int) -> str | None:
    """Why the process a runtime file names is not this user's Blender listening on `address`:`port` (None: it is).

    A stale file can name a pid that now belongs to another program, and anything can listen on a freed port;
    only a Blender process of this OS user that owns the listening socket is the bridge. The user matters for
    root too: root can read every process, and another user who gets the dead Blender's pid and port must never
    receive the token or have its answers passed to the model.
    """
    import psutil

    try:
        process = psutil.Process(pid)
        words = [process.name(), *(Path(arg).name for arg in process.cmdline())]
        owner = _process_owner_problem(process)
        listening = any(
            conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port
            for conn in process.net_connections(kind="tcp")
        )
    except psutil.NoSuchProcess:
        return f"pid {pid} has exited"
    except psutil.AccessDenied:
        return f"pid {pid} belongs to another user, so it is not this user's Blender"
    if owner is not None:
        return f"pid {pid} {owner}, so it is not this user's Blender; the runtime file is stale or forged"
    if not any("blender" in word.lower() for word in words):
        return f"pid {pid} ({process.name()}) is not a Blender process; the runtime file is stale or forged"
    if not listening:
        return f"pid {pid} does not listen on port {port}; the runtime file is stale or forged"
    if sys.platform.startswith("linux") and (strangers := _foreign_listeners(address, port)):
        return f"another user (uid {strangers[0]}) also listens on {address} port {port}; nothing is trusted there"
    return None


def _process_owner_problem(process: psutil.Process) -> str | None:
    """None when the process runs as this process's OS user (real and effective ids alike)."""
    if sys.platform == "win32":
        import psutil

        theirs, mine = process.username(), psutil.Process().username()
        return None if theirs == mine else f"runs as {theirs}, not as {mine}"
    uids, mine = process.uids(), os.geteuid()
    if uids.real == mine and uids.effective == mine:
        return None
    return f"runs as uid {uids.effective}, not as uid {mine}"


def _foreign_listeners(address: str, port: int, proc_net: Path = Path("/proc/net")) -> list[int]:
    """The uids, other than ours, of listening sockets that a connection to `address`:`port` could reach (Linux's
    socket tables; elsewhere psutil's view of the process's own sockets is all there is). "localhost" may reach
    127.0.0.1 or ::1, and a wildcard socket answers for its family, so a stranger on any of them is one too many.
    A dial to an address literal reaches only its own family's wildcard: another user's `[::]:port` beside a
    Blender listening on 127.0.0.1:port is IPv6-only (the kernel refuses a dual-stack bind that overlaps a listening
    IPv4 socket of another user), so it catches nothing of ours, and counting it let any user cut every new
    connection off."""
    dialled = [ipaddress.ip_address(a) for a in (("127.0.0.1", "::1") if address == "localhost" else (address,))]
    wildcards = {4: ipaddress.ip_address("0.0.0.0"), 6: ipaddress.ip_address("::")}
    wanted = {*dialled, *(wildcards[a.version] for a in dialled)}
    wanted |= {ipaddress.IPv6Address(f"::ffff:{a}") for a in dialled if a.version == 4}
    mine, found = os.geteuid(), []
    for table in ("tcp", "tcp6"):
        try:
            rows = (proc_net / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid ...; st 0A is LISTEN
            fields = row.split()
            if len(fields) < 8 or fields[3] != "0A":
                continue
            local, _, hex_port = fields[1].partition(":")
            if int(hex_port, 16) == port and _table_address(local) in wanted and int(fields[7]) != mine:
                found.append(int(fields[7]))
    return found


def _table_address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp{,6} print an address as 32-bit words in the host's byte order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(
        raw[at : at + 4][::-1] if sys.byteorder == "little" else raw[at : at + 4] for at in range(0, len(raw), 4)
    )
    return ipaddress.ip_address(words)
