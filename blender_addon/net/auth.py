"""Bearer tokens: made from the OS's randomness, compared in constant time, never shown.

A token is drawn from `os.urandom` as `secrets.token_urlsafe` draws it, and compared with `hmac.compare_digest`
imported at the first comparison: `secrets` and `hmac` load OpenSSL, about 3 ms of every Blender start, and a
bridge that only answers the Lab's code (without "require token") never compares one.
"""

from __future__ import annotations

import base64
import os


class Token:
    """A bearer secret that never shows itself in a repr, a str or a log line."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not value:
            raise ValueError("a token must not be empty")
        self._value = value

    @classmethod
    def generate(cls) -> Token:
        return cls(base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode("ascii"))

    def reveal(self) -> str:
        """The raw value, for the runtime file only."""
        return self._value

    def matches(self, candidate: str) -> bool:
        """Constant-time comparison, so timing never leaks how much of a guess was right."""
        import hmac  # here, not at the start (the module says why)

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
