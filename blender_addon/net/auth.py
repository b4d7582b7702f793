"""Bearer tokens and the DNS-rebinding guard (Host and Origin checks)."""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})


class Token:
    """A bearer secret that never shows itself in a repr, a str or a log line."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not value:
            raise ValueError("a token must not be empty")
        self._value = value

    @classmethod
    def generate(cls) -> Token:
        return cls(secrets.token_urlsafe(32))

    def reveal(self) -> str:
        """The raw value, for the runtime file only."""
        return self._value

    def matches(self, candidate: str) -> bool:
        """Constant-time comparison, so timing never leaks how much of a guess was right."""
        return hmac.compare_digest(candidate.encode("utf-8", "surrogatepass"), self._value.encode())

    def __repr__(self) -> str:
        return "Token(<hidden>)"

    __str__ = __repr__

    def __reduce__(self) -> object:
        raise TypeError("tokens are not picklable")


def bearer_matches(authorization: str | None, token: Token) -> bool:
    """True when an Authorization header carries exactly this bearer token."""
    if not authorization:
        return False
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return token.matches(credentials.strip())


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
