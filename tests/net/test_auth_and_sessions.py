"""Tokens never show themselves; sessions stay bounded."""

from __future__ import annotations

import hmac
import pickle

import pytest

from blender_addon.net.auth import Token, bearer_matches
from blender_addon.net.rebinding import host_allowed, origin_allowed
from blender_addon.net.sessions import SessionStore


def test_token_never_appears_in_repr_str_or_format() -> None:
    token = Token.generate()
    secret = token.reveal()
    for text in (repr(token), str(token), f"{token}", f"{token!r}", repr([token]), repr({"t": token})):
        assert secret not in text
    with pytest.raises(TypeError):
        pickle.dumps(token)


def test_token_matching_is_exact() -> None:
    token = Token("abc123")
    assert token.matches("abc123")
    assert not token.matches("abc12") and not token.matches("abc1234") and not token.matches("")
    assert not token.matches("ÿ")  # non-ASCII guesses are compared, not crashed on
    assert bearer_matches("Bearer abc123", token) and bearer_matches("bearer  abc123 ", token)
    assert not bearer_matches(None, token) and not bearer_matches("Bearer", token)


def test_tokens_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def compare_digest(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", compare_digest)
    token = Token("abc123")
    assert bearer_matches("Bearer abc123", token) and not bearer_matches("Bearer abc124", token)
    assert compared == [(b"abc123", b"abc123"), (b"abc124", b"abc123")]


def test_host_and_origin_rules() -> None:
    assert host_allowed("127.0.0.1:8080", 8080) and host_allowed("LOCALHOST:8080", 8080)
    assert not host_allowed("127.0.0.1", 8080) and not host_allowed(None, 8080) and not host_allowed("[::1]:80]", 80)
    assert origin_allowed(None) and origin_allowed("http://127.0.0.1:3000") and origin_allowed("https://[::1]")
    assert not origin_allowed("http://127.0.0.1.evil.test") and not origin_allowed("http://localhost:99999")
    assert not origin_allowed("http://user@localhost") and not origin_allowed("chrome-extension://abc")


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_sessions_at_the_cap_evict_the_least_recently_used_first() -> None:
    store = SessionStore(max_sessions=3, idle_ttl=100, clock=_Clock())
    first, second, third = (store.create("2025-11-25") for _ in range(3))
    assert store.touch(first) is not None  # first is now the most recent
    fourth = store.create("2025-11-25")
    assert store.touch(second) is None
    assert all(store.touch(s) is not None for s in (first, third, fourth))
    assert len(store) == 3


def test_idle_sessions_expire_and_used_ones_live_on() -> None:
    clock = _Clock()
    store = SessionStore(max_sessions=100, idle_ttl=10, clock=clock)
    idle, busy = store.create("2025-06-18"), store.create("2025-06-18")
    for _ in range(3):
        clock.now += 6
        assert store.touch(busy) is not None
    assert store.touch(idle) is None
    assert len(store) == 1


def test_hundreds_of_abandoned_sessions_stay_bounded() -> None:
    store = SessionStore(max_sessions=64)
    live = store.create("2025-11-25")
    for _ in range(500):
        store.create("2025-11-25")
        store.touch(live)
    assert len(store) == 64
    assert store.touch(live) is not None
