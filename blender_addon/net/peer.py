"""Which OS user is at the other end of a loopback connection.

Loopback is shared by every user of the machine, and the Blender Lab wire carries no
credentials (the official server sends none), so that listener admits a connection only
when its peer runs as the same OS user as Blender. Each OS answers differently:

- Linux: the kernel's socket diagnostics (netlink sock_diag) look the peer's socket up by its
  four addresses and name its owner's uid; where netlink is unavailable, the same row is found in
  /proc/net/tcp (or tcp6), which costs a pass over every socket on the machine.
- Windows: GetExtendedTcpTable names the peer socket's owning process; its token's user SID
  is compared with ours.
- Elsewhere (macOS): the owner cannot be told without privileges, so the answer is "unknown"
  and the connection is refused with a message that says why and what to do.

A socket's owner counts only while a process still holds it: a client that connects, sends and
closes leaves an orphan (FIN_WAIT, TIME_WAIT: no inode) that the kernel reports as uid 0, which a
Blender run as root would take for itself. So only a live connection (ESTABLISHED, or half-closed
by a process that still holds it) with an inode has an owner; anything else is "unknown", refused.

The host facts are injectable (`PeerHost`), so every branch is tested on any machine.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import sys
from collections.abc import Callable
from pathlib import Path

from .conversation import Address, Peer


def same_user(peer: Peer, host: PeerHost | None = None) -> bool | None:
    """Whether the peer of an accepted connection runs as this OS user; None when that cannot be told."""
    return peer_is_same_user(peer.local, peer.remote, host or PeerHost())


def peer_refusal(same: bool | None, *, token_required: bool) -> str | None:
    """Why a peer is refused at once, or None. Another user is refused even when a token is required (it
    would otherwise get its requests buffered and parsed); an unknown one gets as far as the token."""
    if same is True:
        return None
    if same is False:
        return "this connection belongs to another OS user; the Blender Lab listener only serves its own user"
    if token_required:
        return None
    return (
        "the Blender Lab listener cannot tell which OS user this connection belongs to (on this system, or because "
        "the client closed before it could be asked), so it refuses it; turn on 'Require token' and send the "
        "runtime file's token, or use the token-protected MCP endpoint (the blender server)"
    )


def peer_is_same_user(ours: Address, theirs: Address, host: PeerHost) -> bool | None:
    """True/False when the owner is known, None when it cannot be told."""
    if host.platform.startswith("linux"):
        uid = host.sock_diag(ours, theirs) if host.sock_diag is not None else None
        if uid is None:
            uid = _linux_owner_uid(ours, theirs, host.proc_net)
        return None if uid is None or uid == NO_OWNER else uid == host.my_uid()
    if host.platform == "win32":
        pid = host.windows_peer_pid(ours, theirs)
        if pid is None:
            return None
        theirs_user, mine = host.windows_user_of(pid), host.windows_user_of(os.getpid())
        return None if theirs_user is None or mine is None else theirs_user == mine
    return None


NO_OWNER = -1
"""The kernel answered, and no process holds the peer's socket any more (or it is not a live connection)."""
_OWNED_STATES = frozenset({1, 4, 5})
"""TCP_ESTABLISHED, and FIN_WAIT1/FIN_WAIT2 (a client that half-closed to end its request, still reading)."""


def _owner(state: int, uid: int, inode: int) -> int:
    return uid if state in _OWNED_STATES and inode != 0 else NO_OWNER


def _linux_owner_uid(ours: Address, theirs: Address, proc_net: Path) -> int | None:
    """The uid of the live socket whose local end is `theirs` and whose remote end is `ours`."""
    wanted = (_proc_address(*theirs), _proc_address(*ours))
    for table in ("tcp", "tcp6"):  # streamed, and left at the first match: the kernel writes it as we read
        try:
            with (proc_net / table).open(encoding="ascii") as rows:
                next(rows, None)
                for line in rows:
                    fields = line.split()
                    if len(fields) <= 9:
                        continue
                    ends = (fields[1], fields[2]) if table == "tcp" else (_v4_of_v6(fields[1]), _v4_of_v6(fields[2]))
                    if ends == wanted:
                        return _owner(int(fields[3], 16), int(fields[7]), int(fields[9]))
        except OSError:
            continue
    return None


_SOCK_DIAG_BY_FAMILY = 20
_NETLINK_SOCK_DIAG = 4


def _sock_diag_uid(ours: Address, theirs: Address) -> int | None:
    """The owner uid of the peer's live TCP socket (NO_OWNER: none), asked of the kernel by its exact addresses
    (IPv4); None when the kernel could not be asked."""
    try:
        request_id = (
            struct.pack("!HH", theirs[1], ours[1])  # the peer's socket: source = the peer, destination = us
            + socket.inet_aton(theirs[0]).ljust(16, b"\0")
            + socket.inet_aton(ours[0]).ljust(16, b"\0")
            + struct.pack("=III", 0, 0xFFFFFFFF, 0xFFFFFFFF)  # any interface, no cookie
        )
        body = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + request_id
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as diag:
            diag.send(struct.pack("=IHHII", 16 + len(body), _SOCK_DIAG_BY_FAMILY, 1, 1, 0) + body)  # 1: request
            reply = diag.recv(8192, socket.MSG_DONTWAIT)  # the kernel answers within send(): never a wait
    except (OSError, AttributeError):  # no netlink here (or not Linux): the caller reads /proc instead
        return None
    if len(reply) < 16 or struct.unpack_from("=H", reply, 4)[0] != _SOCK_DIAG_BY_FAMILY:
        return _diag_error(reply)
    if len(reply) < 88:
        return None
    # nlmsghdr (16 bytes), then inet_diag_msg: family, state, timer, retrans, the 48-byte id, expires, rqueue,
    # wqueue, uid, inode
    state = reply[17]
    uid, inode = struct.unpack_from("=II", reply, 16 + 4 + 48 + 12)
    return _owner(state, uid, inode)


_NLMSG_ERROR = 2


def _diag_error(reply: bytes) -> int | None:
    """An error answer: ENOENT means the kernel looked and no such socket exists (the peer has gone);
    anything else (a kernel without sock_diag for TCP) sends the caller to /proc."""
    if len(reply) >= 20 and struct.unpack_from("=H", reply, 4)[0] == _NLMSG_ERROR:
        if -struct.unpack_from("=i", reply, 16)[0] == errno.ENOENT:
            return NO_OWNER
    return None


def _proc_address(ip: str, port: int) -> str:
    """How /proc/net/tcp prints an IPv4 endpoint: the address word in host byte order, then the port."""
    packed = socket.inet_aton(ip)
    return f"{int.from_bytes(packed, sys.byteorder):08X}:{port:04X}"


def _v4_of_v6(entry: str) -> str | None:
    """An IPv4-mapped tcp6 entry (::ffff:a.b.c.d) in the tcp format, for a peer on a dual-stack socket."""
    address, _, port = entry.partition(":")
    if len(address) != 32 or address[:24] != "0000000000000000FFFF0000":
        return None
    return f"{address[24:]}:{port}"


def _windows_peer_pid(ours: Address, theirs: Address) -> int | None:  # pragma: no cover - Windows only
    """GetExtendedTcpTable(TCP_TABLE_OWNER_PID_ALL): the pid owning the peer's end of this connection."""
    import ctypes
    from ctypes import wintypes

    class Row(ctypes.Structure):
        _fields_ = [
            ("state", wintypes.DWORD),
            ("local_addr", wintypes.DWORD),
            ("local_port", wintypes.DWORD),
            ("remote_addr", wintypes.DWORD),
            ("remote_port", wintypes.DWORD),
            ("pid", wintypes.DWORD),
        ]

    get_table = ctypes.windll.iphlpapi.GetExtendedTcpTable  # type: ignore[attr-defined]
    size = wintypes.DWORD(0)
    get_table(None, ctypes.byref(size), False, socket.AF_INET, 5, 0)  # 5: TCP_TABLE_OWNER_PID_ALL
    buffer = ctypes.create_string_buffer(size.value)
    if get_table(buffer, ctypes.byref(size), False, socket.AF_INET, 5, 0) != 0:
        return None
    count = ctypes.cast(buffer, ctypes.POINTER(wintypes.DWORD))[0]
    rows = ctypes.cast(ctypes.addressof(buffer) + ctypes.sizeof(wintypes.DWORD), ctypes.POINTER(Row * count))[0]

    def endpoint(addr: int, port: int) -> Address:
        return socket.inet_ntoa(addr.to_bytes(4, "little")), socket.ntohs(port & 0xFFFF)

    for row in rows:
        if endpoint(row.local_addr, row.local_port) == theirs and endpoint(row.remote_addr, row.remote_port) == ours:
            return int(row.pid)
    return None


def _windows_user_of(pid: int) -> str | None:  # pragma: no cover - Windows only
    """The user SID (S-1-5-…) of a process's token, or None when it cannot be read."""
    import ctypes
    from ctypes import wintypes

    kernel32, advapi32 = ctypes.windll.kernel32, ctypes.windll.advapi32  # type: ignore[attr-defined]
    process = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not process:
        return None
    token = wintypes.HANDLE()
    try:
        if not advapi32.OpenProcessToken(process, 0x0008, ctypes.byref(token)):  # TOKEN_QUERY
            return None
        try:
            size = wintypes.DWORD(0)
            advapi32.GetTokenInformation(token, 1, None, 0, ctypes.byref(size))  # 1: TokenUser
            buffer = ctypes.create_string_buffer(size.value)
            if not advapi32.GetTokenInformation(token, 1, buffer, size, ctypes.byref(size)):
                return None
            sid = ctypes.cast(buffer, ctypes.POINTER(ctypes.c_void_p))[0]
            text = wintypes.LPWSTR()
            if not advapi32.ConvertSidToStringSidW(ctypes.c_void_p(sid), ctypes.byref(text)):
                return None
            try:
                return text.value
            finally:
                kernel32.LocalFree(text)
        finally:
            kernel32.CloseHandle(token)
    finally:
        kernel32.CloseHandle(process)


def _my_uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else -1


class PeerHost:
    """The host facts the peer check asks (platform, kernel tables, uids): injectable, so every branch is tested."""

    __slots__ = ("platform", "proc_net", "sock_diag", "my_uid", "windows_peer_pid", "windows_user_of")

    def __init__(
        self,
        platform: str = sys.platform,
        proc_net: Path = Path("/proc/net"),
        sock_diag: Callable[[Address, Address], int | None] | None = _sock_diag_uid,
        my_uid: Callable[[], int] = _my_uid,
        windows_peer_pid: Callable[[Address, Address], int | None] = _windows_peer_pid,
        windows_user_of: Callable[[int], str | None] = _windows_user_of,
    ) -> None:
        self.platform = platform
        self.proc_net = proc_net
        self.sock_diag = sock_diag
        self.my_uid = my_uid
        self.windows_peer_pid = windows_peer_pid
        self.windows_user_of = windows_user_of
