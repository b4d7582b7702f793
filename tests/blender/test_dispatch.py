"""The one place threads meet bpy: jobs run on the main thread, late jobs never run."""

from __future__ import annotations

import importlib
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hermes_blender.blender_host import ADDON_MODULE

from .conftest import serve_while


def test_jobs_submitted_from_threads_run_on_the_main_thread(dispatch: ModuleType) -> None:
    dispatcher = dispatch.QueuedDispatcher()
    name = serve_while(dispatcher, lambda: dispatcher.submit(lambda: threading.current_thread().name).wait(10))
    assert name == threading.main_thread().name


def test_a_job_still_queued_at_its_deadline_is_cancelled_and_never_runs(
    dispatch: ModuleType, errors: ModuleType
) -> None:
    dispatcher = dispatch.QueuedDispatcher()
    ran: list[int] = []
    job = dispatcher.submit(lambda: ran.append(1))
    with pytest.raises(errors.DispatchTimeout, match="was not run"):
        job.wait(0.05)
    assert dispatcher.run_pending(1.0) == 1
    assert ran == []


def test_errors_inside_jobs_reach_the_caller_and_the_pump_goes_on(dispatch: ModuleType) -> None:
    dispatcher = dispatch.QueuedDispatcher()
    failing = dispatcher.submit(lambda: 1 / 0)
    exiting = dispatcher.submit(lambda: exec("raise SystemExit(3)"))
    fine = dispatcher.submit(lambda: "ok")
    assert dispatcher.run_pending(1.0) == 3
    with pytest.raises(ZeroDivisionError):
        failing.wait(1)
    with pytest.raises(SystemExit):
        exiting.wait(1)
    assert fine.wait(1) == "ok"


def test_closing_releases_everyone_waiting_and_refuses_new_jobs(dispatch: ModuleType, errors: ModuleType) -> None:
    dispatcher = dispatch.QueuedDispatcher()
    job = dispatcher.submit(lambda: "never")
    dispatcher.close()
    with pytest.raises(errors.BridgeStopped):
        job.wait(1)
    with pytest.raises(errors.BridgeStopped):
        dispatcher.submit(lambda: None)


def _gui_bridge(runtime: Any, tmp_path: Path) -> Any:
    config = importlib.import_module(f"{ADDON_MODULE}.service").BridgeConfig
    mode = importlib.import_module(f"{ADDON_MODULE}.service").Mode.GUI
    return runtime.start(config(runtime_file=tmp_path / "server.json", lab_port=None, mode=mode))


def test_gui_tick_respects_its_time_budget(runtime: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dispatcher = _gui_bridge(runtime, tmp_path).dispatcher
    owner = importlib.import_module(f"{ADDON_MODULE}.runtime")
    monkeypatch.setattr(owner, "GUI_BUDGET", 0.05)
    for _ in range(10):
        dispatcher.submit(lambda: time.sleep(0.02))
    ran_per_tick = []
    while dispatcher.pending():
        before = _queued(dispatcher)
        assert runtime.tick() == owner.ACTIVE_INTERVAL
        ran_per_tick.append(before - _queued(dispatcher))
    assert len(ran_per_tick) > 1  # the burst was spread over several ticks
    assert max(ran_per_tick) <= 3  # 0.05 s budget / 0.02 s jobs, plus the one that crosses it


def test_gui_tick_survives_a_failing_job_and_stays_registered(
    runtime: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dispatcher = _gui_bridge(runtime, tmp_path).dispatcher
    owner = importlib.import_module(f"{ADDON_MODULE}.runtime")
    job = dispatcher.submit(lambda: [][1])
    monkeypatch.setattr(dispatcher, "run_pending", _broken_once(dispatcher.run_pending))
    assert runtime.tick() == owner.ACTIVE_INTERVAL  # the pump itself raised, the tick did not
    assert runtime.tick() == owner.ACTIVE_INTERVAL
    with pytest.raises(IndexError):
        job.wait(1)
    assert runtime.pumping


def test_gui_tick_backs_off_when_idle(runtime: Any, tmp_path: Path) -> None:
    dispatcher = _gui_bridge(runtime, tmp_path).dispatcher
    owner = importlib.import_module(f"{ADDON_MODULE}.runtime")
    runtime.tick()
    dispatcher.submit(lambda: None)
    assert runtime.tick() == owner.ACTIVE_INTERVAL  # it ran one: the next may be right behind it
    assert runtime.tick() == owner.IDLE_INTERVAL
    dispatcher.submit(lambda: None)
    assert runtime.tick() == owner.ACTIVE_INTERVAL
    assert owner.IDLE_INTERVAL > owner.ACTIVE_INTERVAL


def test_gui_tick_unregisters_itself_once_the_bridge_is_stopped(runtime: Any, tmp_path: Path) -> None:
    _gui_bridge(runtime, tmp_path)
    assert runtime.pumping
    runtime.stop()
    assert not runtime.pumping
    assert runtime.tick() is None


def _queued(dispatcher) -> int:
    return dispatcher._queue.qsize()


def _broken_once(real):
    state = {"broken": False}

    def run_pending(budget: float) -> int:
        if not state["broken"]:
            state["broken"] = True
            raise RuntimeError("pump fault")
        return real(budget)

    return run_pending


def test_no_background_step_starts_once_a_stop_is_asked(dispatch: ModuleType) -> None:
    """A stop asked while a turn served requests used to start the next frame anyway, which ran to its end."""
    dispatcher = dispatch.InPlaceDispatcher()
    steps: list[int] = []
    dispatcher.start_background(lambda: steps.append(1) is None)
    assert dispatcher.background_step() is True and steps == [1]
    dispatcher.request_stop()
    assert dispatcher.background_step() is False and steps == [1]
