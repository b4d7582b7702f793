"""The background CLI's deadman: started once, released by any number of stops at once, forcing only when needed."""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType
from typing import Any

import pytest

from hermes_blender.blender_host import ADDON_MODULE


@pytest.fixture
def cli(addon: ModuleType) -> ModuleType:
    return importlib.import_module(f"{ADDON_MODULE}.cli")


def test_stops_asked_from_three_threads_at_once_never_break_the_deadman(
    cli: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One signal reaches the stop twice at once (its handler and the wake-up watcher), stdin's end a third time."""
    broken: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", broken.append)  # where a thread's failed bootstrap is reported
    forced: list[int] = []
    for _ in range(100):
        deadman = cli.Deadman(lambda: forced.append(1))
        together = threading.Barrier(3)

        def ask(deadman: Any = deadman, together: threading.Barrier = together) -> None:
            together.wait(10)
            deadman.stop_asked()

        askers = [threading.Thread(target=ask) for _ in range(3)]
        for asker in askers:
            asker.start()
        for asker in askers:
            asker.join(10)
        deadman.settle()  # serving ended within the grace: nothing to force
    assert broken == [] and forced == []


def test_a_stop_that_serving_does_not_follow_within_the_grace_forces_the_exit(cli: ModuleType) -> None:
    forced = threading.Event()
    deadman = cli.Deadman(forced.set)
    assert not forced.wait(0.2)  # no stop asked: nothing forced, however long it serves
    deadman.stop_asked()
    assert forced.wait(30)
    deadman.settle()


def test_serving_that_ends_without_a_stop_ends_the_deadman_too(cli: ModuleType) -> None:
    forced: list[int] = []
    deadman = cli.Deadman(lambda: forced.append(1))
    deadman.settle()
    assert forced == [] and not any(t.name == "hermes-stop" and t.is_alive() for t in threading.enumerate())
