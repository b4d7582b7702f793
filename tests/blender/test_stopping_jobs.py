"""How a job is stopped, on Blender's main thread with real signals (dispatch.py, interrupt.py): a job that caught
its interrupt and answered is still reported stopped, the interrupt is repeated within the grace, installed code's
clean-up is left to finish, a closed dispatcher runs nothing, and the watchdog stops a job run in place."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import pytest

from hermes_blender.blender_host import ADDON_MODULE, REPO_MODULE
from hermes_blender.client import modern_request

from .conftest import serve_while

pytestmark = pytest.mark.timeout(60)

LIBRARY = '''"""Installed code (never policed line by line), as a library's or the bridge's own would be."""

import threading
import time


def answers_anyway():
    """Catches the interrupt where it waits and answers as if nothing happened."""
    try:
        time.sleep(600)
    except BaseException:
        pass
    return "answered anyway"


def runs_then_cleans(agent, cleaned):
    """Runs agent code; its clean-up takes a while (interrupts keep coming meanwhile), then says it finished."""
    try:
        exec(agent, {})
    finally:
        threading.Event().wait(0.5)
        cleaned.append(True)
'''


@pytest.fixture
def interrupt(addon: ModuleType) -> ModuleType:
    return importlib.import_module(f"{ADDON_MODULE}.interrupt")


@pytest.fixture
def library(interrupt: ModuleType) -> Iterator[ModuleType]:
    """`LIBRARY` as a real file in an installed folder (the extension repository this add-on was installed in)."""
    repo = next(repo for repo in bpy.context.preferences.extensions.repos if repo.module == REPO_MODULE)
    path = Path(repo.directory) / "hermes_test_library.py"
    assert interrupt.installed(str(path))
    path.write_text(LIBRARY)
    try:
        spec = importlib.util.spec_from_file_location("hermes_test_library", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        path.unlink()


@pytest.fixture
def in_place(dispatch: ModuleType) -> Iterator[Any]:
    """Background Blender's dispatcher with its interrupter installed on this (the main) thread, as a bridge's."""
    dispatcher = dispatch.InPlaceDispatcher()
    dispatcher.interrupter.install()
    try:
        yield dispatcher
    finally:
        dispatcher.interrupter.uninstall()


@pytest.fixture
def signals_only(interrupt: ModuleType) -> Iterator[None]:
    """Every monitoring tool id the interrupter could police lines with is taken (as agent code may take them; and
    Python 3.11 has none): only the repeated signal stops a job."""
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        yield
        return
    taken = []
    for tool_id in (3, 4):
        if monitoring.get_tool(tool_id) == interrupt._TOOL_NAME:  # an earlier test's dispatcher's, left claimed
            monitoring.set_events(tool_id, 0)
            monitoring.register_callback(tool_id, monitoring.events.LINE, None)
            monitoring.free_tool_id(tool_id)
        if monitoring.get_tool(tool_id) is None:
            monitoring.use_tool_id(tool_id, "hermes-test")
            taken.append(tool_id)
    try:
        yield
    finally:
        for tool_id in taken:
            monitoring.free_tool_id(tool_id)


def test_a_job_that_caught_its_interrupt_and_answered_is_still_reported_interrupted(
    in_place: Any, errors: ModuleType, library: ModuleType
) -> None:
    """Its answer was made after it was stopped mid-way: passing it on as the result would be a lie."""
    with in_place.serving(), pytest.raises(errors.DispatchTimeout) as stopped:
        in_place.call(library.answers_anyway, 0.3)
    assert stopped.value.state == "interrupted"


def test_installed_clean_up_runs_to_its_end_while_the_interrupt_repeats(
    in_place: Any, errors: ModuleType, interrupt: ModuleType, library: ModuleType
) -> None:
    """Once the interrupt was raised, a repeat landing in installed code (the bridge's own restore of stdout and
    operators, a library's finally) would cut its clean-up short."""
    agent = compile("import time\ntime.sleep(600)", interrupt.AGENT_CODE, "exec")
    cleaned: list[bool] = []
    with in_place.serving(), pytest.raises(errors.DispatchTimeout) as stopped:
        in_place.call(functools.partial(library.runs_then_cleans, agent, cleaned), 0.3)
    assert stopped.value.state == "interrupted" and cleaned == [True]


def test_a_job_that_swallows_the_first_interrupt_is_stopped_by_a_repeat_within_the_grace(
    dispatch: ModuleType, errors: ModuleType, signals_only: None
) -> None:
    """One interrupt is not enough: a `try`/`except` around a wait eats it, and the next wait would hold Blender."""
    dispatcher = dispatch.QueuedDispatcher()
    dispatcher.interrupter.install()
    waits: list[str] = []

    def swallows_the_first() -> str:
        try:
            time.sleep(5)
        except errors.JobInterrupted:
            waits.append("first interrupt swallowed")
        time.sleep(5)  # bounded, so a dispatcher that never repeats still lets this test end
        return "outlasted"

    try:
        with pytest.raises(errors.DispatchTimeout) as stopped:
            serve_while(dispatcher, lambda: dispatcher.call(swallows_the_first, 0.3))
    finally:
        dispatcher.interrupter.uninstall()
    assert waits == ["first interrupt swallowed"]
    assert stopped.value.state == "interrupted", stopped.value


def test_a_closed_in_place_dispatcher_runs_no_job_and_starts_no_background_step(
    in_place: Any, errors: ModuleType
) -> None:
    ran: list[str] = []
    in_place.start_background(lambda: ran.append("step queued before the close") is None)
    with in_place.serving():
        in_place.close()
        with pytest.raises(errors.BridgeStopped):
            in_place.call(lambda: ran.append("job"), 5.0)
        with pytest.raises(errors.BridgeStopped):
            in_place.start_background(lambda: ran.append("step asked after the close") is None)
        assert in_place.background_step() is False
    assert ran == []


def _ask(bridge: Any, code: str, timeout: float) -> dict[str, Any]:
    token = json.loads(bridge.runtime_file.read_text())["token"]
    body, headers = modern_request("tools/call", {"name": "execute_blender_code", "arguments": {"code": code}})
    request = urllib.request.Request(bridge.endpoint, body, {**headers, "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())["result"]


def test_the_watchdog_interrupts_a_job_run_in_place_past_its_deadline(
    service: ModuleType, tmp_path: Path, runtime: Any
) -> None:
    """In background Blender nobody else waits: only the watchdog thread stops a job past its deadline. Without it
    this fails by assertion within the client's own bound (then the test stops the job itself), not by a hang."""
    config = service.BridgeConfig(
        runtime_file=tmp_path / "server.json", lab_port=None, job_timeout=1, mode=service.Mode.BACKGROUND
    )
    bridge = runtime.start(config)

    def ask() -> dict[str, Any] | None:
        try:
            return _ask(bridge, "import time\ntime.sleep(600)", timeout=15)
        except TimeoutError:
            return None  # no answer: the job still holds the main thread
        finally:
            bridge.dispatcher.request_stop()
            bridge.dispatcher.interrupt_running()

    answer = serve_while(bridge.dispatcher, ask, bridge.serve)
    assert answer is not None, "no answer within 15 s: nothing interrupted the job at its 1 s deadline"
    error = json.loads(answer["content"][0]["text"])
    assert answer["isError"] is True and error["state"] == "interrupted", error


def test_a_deadline_that_falls_while_the_change_is_read_still_keeps_the_change_told_and_its_step(
    service: ModuleType, tmp_path: Path, runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's code ran and changed the scene; the deadline falls while its summary is read (a large scene):
    the stop waits until the change is told and its undo step kept, so the agent's undo still takes it back."""
    changes = importlib.import_module(f"{ADDON_MODULE}.changes")
    summary = changes.Scene._summary

    def slow(scene: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("unnamed"):  # the agent's call's own span: read past its 1 s deadline
            time.sleep(2.5)
        return summary(scene, *args, **kwargs)

    monkeypatch.setattr(changes.Scene, "_summary", slow)
    config = service.BridgeConfig(
        runtime_file=tmp_path / "server.json", lab_port=None, job_timeout=1, mode=service.Mode.BACKGROUND
    )
    bridge = runtime.start(config)
    answer = serve_while(
        bridge.dispatcher, lambda: _ask(bridge, "bpy.data.objects['Cube'].location.x = 4", timeout=30), bridge.serve
    )
    monkeypatch.setattr(changes.Scene, "_summary", summary)
    assert answer is not None
    assert bpy.data.objects["Cube"].location.x == 4.0
    assert len(bridge.execution.history.done) == 1, answer  # the step is kept: the agent's undo takes it back
