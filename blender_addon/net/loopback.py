"""Loopback-only binding, enforced in code whatever the preferences say."""

from __future__ import annotations

import errno
import socket
import sys

from ..errors import NonLoopbackAddress, PortUnavailable

BACKLOG = 4096
"""The listen queue (the kernel caps it: Linux's somaxconn is 4096, macOS's 128). Another user who churns hundreds
of connections at once filled a queue of 128, and an honest connection's SYN then waited for the kernel's 1 s
retransmit (p99 69x its quiet value); a turn of the main loop accepts up to this many, so a burst never leaves
it full."""

_LOOPBACK = frozenset({"127.0.0.1", "::1"})
"""The addresses the bridge listens on, in the form `ipaddress` would give them back."""

# Windows reports an excluded or reserved port range as WSAEACCES (WinError 10013).
_WSAEACCES = 10013


def loopback_address(host: str) -> str:
    """Return the numeric loopback address for `host`, or refuse it.

    `localhost` maps to 127.0.0.1 without asking a resolver: a hosts file (or a Flatpak
    sandbox) must never be able to turn it into something else.
    """
    candidate = host.strip().strip("[]")
    if candidate.lower() == "localhost":
        return "127.0.0.1"
    if candidate in _LOOPBACK:
        return candidate
    import ipaddress  # any other spelling: not at every start (1.4 ms), where the bridge names 127.0.0.1

    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        raise NonLoopbackAddress(
            f"refusing to listen on {host!r}: only loopback addresses (127.0.0.1, ::1) are allowed"
        ) from None
    if not address.is_loopback:
        raise NonLoopbackAddress(
            f"refusing to listen on {host!r}: it is reachable from other machines; "
            "the bridge only listens on loopback (127.0.0.1, ::1)"
        )
    return str(address)


def bind_loopback(host: str, port: int, *, backlog: int = BACKLOG) -> socket.socket:
    """Bind and listen on a loopback address; port 0 lets the OS choose."""
    address = loopback_address(host)
    if not 0 <= port <= 65535:
        raise PortUnavailable(f"port {port} is out of range (0-65535)")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if sys.platform == "win32":
            # Without it another process could bind the same port and steal connections.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
        else:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise PortUnavailable(describe_bind_error(address, port, exc)) from exc
    return sock


def describe_bind_error(address: str, port: int, exc: OSError) -> str:
    """Turn a bind failure into one sentence with the fix."""
    code = getattr(exc, "winerror", None) or exc.errno
    if code == errno.EADDRINUSE or code == 10048:
        return (
            f"port {port} on {address} is already in use by another program "
            "(another Blender, another MCP bridge, or a stray server); close it or choose another port"
        )
    if code in (errno.EACCES, _WSAEACCES):
        return (
            f"port {port} on {address} is forbidden by the operating system "
            "(on Windows it may sit in an excluded port range: see `netsh interface ipv4 show "
            "excludedportrange protocol=tcp`); choose another port"
        )
    return f"cannot listen on {address}:{port}: {exc.strerror or exc}"
