"""Stop and restart asked by agent code from inside its own job: carried out after the job, in every mode.

The job's answer goes out first; then the one bridge stops (listeners closed, runtime file withdrawn) or is
replaced by exactly one new bridge, whichever loop serves it: the GUI's timer pump, the embedded pump or the
background main loop.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hermes_blender.blender_host import ADDON_MODULE
from hermes_blender.client import modern_request

from .conftest import serve_while, tick_while

pytestmark = pytest.mark.timeout(120)

RESTART = (
    f"from {ADDON_MODULE}.runtime import RUNTIME\nRUNTIME.start(RUNTIME.bridge.config)\nresult = {{'asked': True}}"
)
DISABLE = f"import addon_utils\naddon_utils.disable({ADDON_MODULE!r})\nresult = {{'asked': True}}"
STOP = "bpy.ops.hermes_bridge.stop()\nresult = {'asked': True}"


def _call(runtime_file: Path, code: str) -> dict:
    """One execute_blender_code call to the bridge the runtime file names now."""
    published = json.loads(runtime_file.read_text())
    body, headers = modern_request("tools/call", {"name": "execute_blender_code", "arguments": {"code": code}})
    request = urllib.request.Request(
        published["http"] + "/mcp", data=body, headers={**headers, "Authorization": f"Bearer {published['token']}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["result"]


def _published_url(runtime_file: Path) -> str | None:
    """The URL the runtime file names, None between the old bridge's withdrawal and the new one's publication."""
    try:
        return json.loads(runtime_file.read_text())["http"]
    except FileNotFoundError:
        return None


def _eventually(holds: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Whether `holds()` comes true within `seconds` (a bound, so a broken promise fails instead of hanging)."""
    ends = time.monotonic() + seconds
    while not holds():
        if time.monotonic() > ends:
            return False
        time.sleep(0.01)
    return True


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def enabled_again(addon: ModuleType) -> Any:
    """The add-on enabled again after a test that had agent code disable it."""
    yield
    import addon_utils

    addon_utils.enable(ADDON_MODULE, default_set=True)


@pytest.mark.parametrize("mode", ["EMBEDDED", "BACKGROUND"])
def test_agent_code_that_disables_the_add_on_gets_its_answer_then_the_bridge_stops(
    service: ModuleType, runtime: Any, tmp_path: Path, mode: str, enabled_again: None
) -> None:
    """Embedded: the pump ignored a stop asked after the job, and the bridge kept serving with its file published."""
    bridge = runtime.start(
        service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=None, mode=service.Mode[mode])
    )

    def disable_then_see_it_stop() -> tuple[dict, bool]:
        answer = _call(bridge.runtime_file, DISABLE)
        return answer, _eventually(lambda: runtime.bridge is None)

    answer, stopped = serve_while(None, disable_then_see_it_stop, runtime.serve, runtime.request_stop)
    assert answer["isError"] is False and answer["structuredContent"]["result"] == {"asked": True}
    assert stopped  # the bridge stopped by itself once the answer was out, not because the test ended serving
    assert not bridge.runtime_file.exists() and not _listening(bridge.port)


@pytest.mark.parametrize("mode", ["EMBEDDED", "BACKGROUND"])
def test_a_restart_from_agent_code_leaves_exactly_one_new_bridge_serving(
    service: ModuleType, runtime: Any, tmp_path: Path, mode: str
) -> None:
    """Background: the same call once ended the process; now the loop carries the restart out and serves on."""
    old = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=None, mode=service.Mode[mode]))

    def restart_then_ask_the_new_one() -> tuple[dict, dict]:
        asked = _call(old.runtime_file, RESTART)
        assert _eventually(lambda: _published_url(old.runtime_file) not in (old.url, None))  # published after it
        return asked, _call(old.runtime_file, "result = {'new': True}")

    asked, after = serve_while(None, restart_then_ask_the_new_one, runtime.serve, runtime.request_stop)
    assert asked["isError"] is False and after["structuredContent"]["result"] == {"new": True}
    new = runtime.bridge
    assert new is not None and new is not old and _listening(new.port) and not _listening(old.port)


def test_a_restart_from_agent_code_in_the_gui_closes_the_old_listener_and_keeps_the_new_one(
    service: ModuleType, runtime: Any, tmp_path: Path
) -> None:
    """The GUI once left the old listener running (its callers waited 120 s for `busy`), then its deferred stop
    stopped the new bridge."""
    old = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=None, mode=service.Mode.GUI))

    def restart_then_ask_the_new_one() -> tuple[dict, dict]:
        asked = _call(old.runtime_file, RESTART)
        assert _eventually(lambda: _published_url(old.runtime_file) not in (old.url, None))
        return asked, _call(old.runtime_file, "result = {'new': True}")

    asked, after = tick_while(restart_then_ask_the_new_one)
    for _ in range(20):
        runtime.tick()  # nothing left over stops the new bridge later
    new = runtime.bridge
    assert asked["isError"] is False and after["structuredContent"]["result"] == {"new": True}
    assert new is not None and new is not old and runtime.pumping
    assert _listening(new.port) and not _listening(old.port)


def test_the_panels_stop_pressed_by_agent_code_in_the_gui_answers_then_stops(
    service: ModuleType, runtime: Any, tmp_path: Path
) -> None:
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=None, mode=service.Mode.GUI))
    answer = tick_while(lambda: _call(bridge.runtime_file, STOP))
    runtime.tick()
    assert answer["isError"] is False and runtime.bridge is None and not runtime.pumping
    assert not bridge.runtime_file.exists() and not _listening(bridge.port)


@pytest.mark.parametrize("mode", ["GUI", "EMBEDDED", "BACKGROUND"])
def test_the_last_command_of_a_job_counts_a_stop_after_a_restart_stops(
    service: ModuleType, runtime: Any, tmp_path: Path, mode: str
) -> None:
    """A stop asked after a restart in one job once left a new bridge serving (in the GUI even with the add-on
    disabled, so that nothing could stop it any more)."""
    bridge = runtime.start(
        service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=None, mode=service.Mode[mode])
    )
    code = f"from {ADDON_MODULE}.runtime import RUNTIME\nRUNTIME.start(RUNTIME.bridge.config)\nRUNTIME.stop()\nresult = {{}}"

    def ask_then_see_it_stop() -> tuple[dict, bool]:
        answer = _call(bridge.runtime_file, code)
        return answer, _eventually(lambda: runtime.bridge is None and _published_url(bridge.runtime_file) is None)

    if mode == "GUI":
        answer, stopped = tick_while(ask_then_see_it_stop)
        for _ in range(20):
            runtime.tick()
    else:
        answer, stopped = serve_while(None, ask_then_see_it_stop, runtime.serve, runtime.request_stop)
    assert answer["isError"] is False and stopped
    assert runtime.bridge is None  # and stays so: no restart came after the stop


@pytest.mark.parametrize("mode", ["EMBEDDED", "BACKGROUND"])
def test_a_stop_asked_while_a_restart_is_carried_out_is_kept(
    service: ModuleType, runtime: Any, tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal that came while the old bridge closed (its answers may take the stop policy's seconds) was lost:
    the new bridge started and served on."""
    bridge = runtime.start(
        service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=None, mode=service.Mode[mode])
    )
    close = type(bridge).close

    def close_with_a_signal_meanwhile(self: Any) -> None:
        runtime.request_stop()
        close(self)

    monkeypatch.setattr(type(bridge), "close", close_with_a_signal_meanwhile)
    answer = serve_while(None, lambda: _call(bridge.runtime_file, RESTART), runtime.serve, lambda: None)
    assert answer["isError"] is False and runtime.bridge is None and not bridge.runtime_file.exists()


def test_a_deferred_result_cut_short_by_a_stop_says_the_code_ran(
    service: ModuleType, runtime: Any, tmp_path: Path
) -> None:
    """It once said "the request was not run", which invites running the code again."""
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=None, mode=service.Mode.GUI))
    code = (
        f"from {ADDON_MODULE}.runtime import RUNTIME\ndef check_is_finished():\n    RUNTIME.stop()\n    return None\n"
    )
    answer = tick_while(lambda: _call(bridge.runtime_file, code))
    error = json.loads(answer["content"][0]["text"])
    assert answer["isError"] is True and error["state"] == "stopped" and "the code ran" in error["error"]


def test_in_the_gui_a_stop_asked_from_outside_a_job_stops_the_bridge(
    service: ModuleType, runtime: Any, tmp_path: Path
) -> None:
    """`request_stop` once left the GUI's bridge serving and its timer spinning."""
    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=None, mode=service.Mode.GUI))
    runtime.request_stop()
    assert runtime.tick() is None
    assert runtime.bridge is None and not runtime.pumping and not bridge.runtime_file.exists()


def test_in_the_gui_a_stopped_bridge_leaves_no_timer_looking_for_the_users_edits(
    service: ModuleType, runtime: Any, tmp_path: Path
) -> None:
    """Blender's timers know a function by identity: unregistering a fresh bound method left the old one ticking."""
    import bpy

    bridge = runtime.start(service.BridgeConfig(runtime_file=tmp_path / "s.json", lab_port=None, mode=service.Mode.GUI))
    timer = bridge.execution._edits_timer
    assert bpy.app.timers.is_registered(timer)
    runtime.stop()
    assert not bpy.app.timers.is_registered(timer)
