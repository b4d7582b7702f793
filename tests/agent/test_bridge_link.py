"""The relay's link to the bridge: a kept connection the bridge closed is never a lost call.

The bridge closes a kept connection when it has waited idle too long, or to make room at its cap; the next
request then finds it closed. It is sent once more on a new connection (the bridge never closes one after a
request passed its gate without answering, so that request never ran). These run against the bridge's own
HTTP conversation and drivers in this process; the "is it this user's Blender" check is held elsewhere
(tests/e2e/test_trust.py) and is stepped over here, where the bridge is this test process.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from blender_addon.net.http import HttpLimits
from hermes_blender import bridge_link
from hermes_blender.bridge_link import BridgeLink
from hermes_blender.contract.liveness import LiveEndpoint
from hermes_blender.errors import LiveEndpointUnavailable
from tests.net.conftest import Endpoint, start_endpoint

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["threads", "main-loop"])
def quick_to_close(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Endpoint]:
    """A bridge that closes a kept connection 0.2 s after its last answer."""
    monkeypatch.setattr(bridge_link, "require_own_blender", lambda endpoint: None)
    endpoint = start_endpoint(HttpLimits(idle_timeout=0.2), driver=request.param)
    yield endpoint
    endpoint.listener.stop()


def _link(endpoint: Endpoint) -> BridgeLink:
    live = LiveEndpoint(f"http://127.0.0.1:{endpoint.port}/mcp", endpoint.token, 1, Path("server.json"))
    return BridgeLink(live, timeout=30)


def _closed_by_the_bridge(endpoint: Endpoint) -> None:
    while endpoint.listener.connection_count:
        time.sleep(0.01)


def test_a_call_after_the_bridge_closed_the_kept_connection_is_sent_again_and_answered(
    quick_to_close: Endpoint,
) -> None:
    async def calls() -> list[object]:
        link = _link(quick_to_close)
        try:
            first = await link.request("tools/call", {"name": "echo", "arguments": {"n": 1}})
            await anyio.to_thread.run_sync(_closed_by_the_bridge, quick_to_close)
            second = await link.request("tools/call", {"name": "echo", "arguments": {"n": 2}})
        finally:
            await link.close()
        return [first["structuredContent"], second["structuredContent"]]

    assert anyio.run(calls) == [{"echo": {"n": 1}}, {"echo": {"n": 2}}]
    assert [name for name, _ in quick_to_close.tools.calls] == ["echo", "echo"]  # each ran once


@pytest.mark.parametrize("driver", ["threads", "main-loop"])
def test_every_new_connection_is_dialled_only_after_the_process_is_checked_again(
    driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blender died after the link was made and another user's process took its pid and port: the next new
    connection (here the resend after the kept one closed) must not be dialled, the token never sent."""
    endpoint = start_endpoint(HttpLimits(idle_timeout=0.2), driver=driver)
    verdicts = iter([None, None, "pid 42 runs as uid 1001, not as uid 0"])

    def check(live: LiveEndpoint) -> None:
        if (problem := next(verdicts)) is not None:
            raise LiveEndpointUnavailable(problem, state="endpoint_unavailable")

    monkeypatch.setattr(bridge_link, "require_own_blender", check)

    async def calls() -> None:
        link = _link(endpoint)  # the first check: when the link is made
        try:
            await link.request("tools/call", {"name": "echo", "arguments": {"n": 1}})  # the second: its connection
            await anyio.to_thread.run_sync(_closed_by_the_bridge, endpoint)
            await link.request("tools/call", {"name": "echo", "arguments": {"n": 2}})
        finally:
            await link.close()

    try:
        with pytest.raises(LiveEndpointUnavailable, match="runs as uid 1001"):
            anyio.run(calls)
    finally:
        endpoint.listener.stop()
    assert [arguments for _, arguments in endpoint.tools.calls] == [{"n": 1}]
