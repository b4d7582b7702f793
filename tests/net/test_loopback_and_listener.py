"""Loopback only, in code; a busy port is a clear error; sockets get TCP_NODELAY."""

from __future__ import annotations

import socket
import threading

import pytest

from blender_addon.errors import NonLoopbackAddress, PortUnavailable
from blender_addon.net import threaded
from blender_addon.net.conversation import Peer
from blender_addon.net.loopback import bind_loopback, loopback_address
from blender_addon.net.threaded import TcpListener

from .drivers import Greeting


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "10.0.0.1", "example.com", "", "127.0.0.1.nip.io"])
def test_binding_a_non_loopback_address_is_refused(host: str) -> None:
    with pytest.raises(NonLoopbackAddress, match="loopback"):
        bind_loopback(host, 0)


@pytest.mark.parametrize(
    ("host", "expected"),
    [("localhost", "127.0.0.1"), ("127.0.0.1", "127.0.0.1"), ("[::1]", "::1"), ("127.5.5.5", "127.5.5.5")],
)
def test_loopback_spellings_map_to_numeric_addresses(host: str, expected: str) -> None:
    assert loopback_address(host) == expected


def test_a_busy_port_is_a_clear_error() -> None:
    holder = bind_loopback("127.0.0.1", 0)
    port = holder.getsockname()[1]
    try:
        with pytest.raises(PortUnavailable, match=f"port {port} .* already in use"):
            bind_loopback("127.0.0.1", port)
    finally:
        holder.close()


def test_accepted_connections_have_tcp_nodelay(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    done = threading.Event()
    real_of = threaded.peer_of

    def of(sock: socket.socket) -> Peer:
        seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        done.set()
        return real_of(sock)

    monkeypatch.setattr(threaded, "peer_of", of)
    listener = TcpListener("127.0.0.1", 0, Greeting, name="t")
    try:
        socket.create_connection(listener.address, timeout=5).close()
        assert done.wait(5)
        assert seen == [1]
    finally:
        listener.stop()
