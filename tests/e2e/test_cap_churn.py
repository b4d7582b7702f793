"""Another OS user's load at the bridge's port costs no honest call: through the stdio relay, and on a new
connection per call (the red team's cap churn and connect flood, issue 31).

Another user, made for the run, keeps hundreds of connections open (idle, with half a header sent, or dribbling a
header a byte a second) or connects and closes as fast as it can, while the user's own calls go on with short
pauses between them, as a model's do. Each honest call must come back with the scene: no `endpoint_unavailable`
while Blender serves. Latency under these loads is measured by `scripts/bench.py` (docs/performance.md), not here.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_blender.client import modern_request
from hermes_blender.headless import HeadlessBlender
from tests.other_user import OtherUser, needs_a_made_user
from tests.stdio_frames import INITIALIZE, INITIALIZED

pytestmark = [pytest.mark.timeout(300), needs_a_made_user]

STRANGER = Path(__file__).resolve().parents[2] / "scripts" / "stranger.py"
CALLS = 80
PAUSE = 0.02
"""Seconds between two honest calls: a known client idle this long is older than every stranger who churns."""


@pytest.fixture(params=["idle", "half-header", "slowloris", "connect-flood"])
def stranger(request: pytest.FixtureRequest, blender: HeadlessBlender, other_user: OtherUser) -> Iterator[str]:
    assert blender.endpoint is not None
    load = other_user.run_script(STRANGER, str(blender.endpoint.port), request.param, "300")
    try:
        assert load.stdout is not None and load.stdout.readline().strip() == "ready"
        yield request.param
    finally:
        load.kill()
        load.communicate()


def test_no_honest_call_through_the_relay_is_lost_to_another_users_load(
    stranger: str, blender: HeadlessBlender
) -> None:
    relay = subprocess.Popen(
        [sys.executable, "-m", "hermes_blender.cli", "mcp", "--runtime-file", str(blender.runtime_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert relay.stdin is not None and relay.stdout is not None
    failures = []
    try:
        relay.stdin.write(json.dumps(INITIALIZE) + "\n" + json.dumps(INITIALIZED) + "\n")
        relay.stdin.flush()
        _answer(relay, 1)
        for n in range(2, CALLS + 2):
            call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "get_objects_summary"}}
            relay.stdin.write(json.dumps(call) + "\n")
            relay.stdin.flush()
            result = _answer(relay, n)["result"]
            if result.get("isError"):
                failures.append(result["content"][0]["text"][:300])
            time.sleep(PAUSE)
    finally:
        relay.stdin.close()
        relay.wait(timeout=30)
        relay.stdout.close()
    assert failures == [], f"{len(failures)} of {CALLS} honest calls lost under {stranger}: {failures[:3]}"


def _answer(relay: subprocess.Popen[str], request_id: int) -> dict:
    """The answer to `request_id`, past any notification the relay sends first (a changed tool list)."""
    assert relay.stdout is not None
    while (message := json.loads(relay.stdout.readline())).get("id") != request_id:
        pass
    return message


def test_no_honest_call_on_a_new_connection_each_is_lost_to_another_users_load(
    stranger: str, blender: HeadlessBlender
) -> None:
    assert blender.endpoint is not None
    body, headers = modern_request("tools/call", {"name": "get_objects_summary", "arguments": {}})
    headers = {**headers, **blender.endpoint.headers(), "Accept": "application/json"}
    failures = []
    for _ in range(CALLS):
        conn = http.client.HTTPConnection("127.0.0.1", blender.endpoint.port, timeout=60)
        try:
            conn.request("POST", "/mcp", body=body, headers=headers)
            answer = conn.getresponse()
            data = answer.read()
            if answer.status != 200 or b'"isError":true' in data.replace(b" ", b""):
                failures.append(f"{answer.status} {data[:200]!r}")
        except (OSError, http.client.HTTPException) as exc:
            failures.append(repr(exc))
        finally:
            conn.close()
        time.sleep(PAUSE)
    assert failures == [], f"{len(failures)} of {CALLS} honest calls lost under {stranger}: {failures[:3]}"
