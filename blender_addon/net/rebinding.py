"""The DNS-rebinding guard: a request's Host and Origin headers must name this listener on loopback."""

from __future__ import annotations

from urllib.parse import urlsplit

_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})


def host_allowed(host_header: str | None, port: int) -> bool:
    """The Host header must name this listener on loopback (DNS-rebinding guard)."""
    if not host_header:
        return False
    name, sep, host_port = host_header.strip().lower().rpartition(":")
    if not sep or "]" in host_port:
        return False
    return name in _LOOPBACK_NAMES and host_port == str(port)


def origin_allowed(origin: str | None) -> bool:
    """A browser Origin, when present, must be a loopback http(s) origin."""
    if origin is None:
        return True
    try:
        parts = urlsplit(origin.strip())
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or parts.path not in ("", "/") or parts.username:
        return False
    return parts.hostname in ("127.0.0.1", "localhost", "::1")
