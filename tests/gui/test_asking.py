"""In the interactive Blender 5.2: the panel shows the mode and switches it with a real click; in mode `ask` the
agent's call that deletes the Cube shows the question over the window with the code readable; a real click
(xdotool) on Cancel denies it (the Cube stays, no agent step), on Allow runs it; "Allow the rest of this
conversation" lets the next call through unasked; an unanswered question times out."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy
import pytest

from hermes_blender.client import ToolResult
from tests.gui.conftest import _launched
from tests.gui.harness import GuiBlender
from tests.gui.test_lifecycle import _open_hermes_panel, _panel_button

pytestmark = pytest.mark.timeout(600)

DELETE = "bpy.data.objects.remove(bpy.data.objects[{name!r}])\nresult = {{'deleted': {name!r}}}"
PREFS = "import bpy\nprefs = bpy.context.preferences.addons['bl_ext.user_default.hermes_bridge'].preferences\n"
QUESTION_SHOWN = (
    "from bl_ext.user_default.hermes_bridge.runtime import RUNTIME\n"
    "result = [q.shown for q in RUNTIME.bridge.execution.consent.waiting()]"
)
STEPS = (
    "from bl_ext.user_default.hermes_bridge.runtime import RUNTIME\nresult = len(RUNTIME.bridge.execution.history.done)"
)
BLUE = numpy.array([71, 114, 179])
"""Blender's default button (the dialog's Cancel: it denies, and is the default)."""


@pytest.fixture(scope="module")
def asking(tmp_path_factory: pytest.TempPathFactory, display: str) -> Iterator[GuiBlender]:
    blender = _launched(tmp_path_factory.mktemp("asking"), display, lab=False)
    blender.probe(PREFS + "prefs.agent_mode = 'ASK'\nresult = None")  # the person's choice, as the panel sets it
    yield blender
    blender.kill()


class Waiting:
    """An agent's call on a thread of its own: it waits for the person's answer."""

    def __init__(self, blender: GuiBlender, tool: str, arguments: dict[str, Any]) -> None:
        self.answer: ToolResult | None = None
        self._thread = threading.Thread(target=self._run, args=(blender, tool, arguments), daemon=True)
        self._thread.start()

    def _run(self, blender: GuiBlender, tool: str, arguments: dict[str, Any]) -> None:
        self.answer = blender.call(tool, arguments)

    def result(self, timeout: float = 60) -> ToolResult:
        self._thread.join(timeout)
        assert self.answer is not None, "the call never answered"
        return self.answer


def _ask(blender: GuiBlender, name: str) -> Waiting:
    """The agent's call that deletes `name`, once its question is in front of the person."""
    subprocess.run(["xdotool", "mousemove", "512", "360"], env=blender.env, check=True, timeout=30)
    waiting = Waiting(blender, "execute_blender_code", {"code": DELETE.format(name=name)})
    deadline = time.monotonic() + 30
    while blender.probe(QUESTION_SHOWN) != [True]:
        assert time.monotonic() < deadline, "the question was never shown"
        time.sleep(0.2)
    time.sleep(1.5)  # a software-GL redraw
    return waiting


def _cancel_button(shot: Path) -> tuple[int, int, int]:
    """The dialog's Cancel button in a screenshot: its centre and width (rows of Blender's default-button blue)."""
    pixels = subprocess.run(["convert", str(shot), "rgb:-"], capture_output=True, check=True, timeout=30).stdout
    image = numpy.frombuffer(pixels, numpy.uint8).reshape(720, 1024, 3)
    blue = numpy.all(numpy.abs(image.astype(int) - BLUE) <= 3, axis=2)
    rows = numpy.nonzero(blue.sum(axis=1) > 150)[0]  # a button's width of blue, not a small highlight
    assert rows.size, f"no dialog button in {shot}"
    columns = numpy.nonzero(blue[rows].any(axis=0))[0]
    return int(columns.mean()), int(rows.mean()), int(columns.max() - columns.min())


def _objects(blender: GuiBlender) -> set[str]:
    return set(blender.probe("import bpy\nresult = [o.name for o in bpy.data.objects]"))


def _state(answer: ToolResult) -> str | None:
    return json.loads(answer.text).get("state") if answer.is_error else None


def test_the_panel_shows_the_mode_and_a_real_click_switches_it(asking: GuiBlender) -> None:
    sidebar = _open_hermes_panel(asking)  # first: its tab's place counts on the Cube being active (the Item tab)
    x, y = _panel_button(sidebar, 3)  # Running, the address, "Agent may:", then Read-only | Ask first | Full
    asking.click(sidebar["left"] + (x - sidebar["left"]) // 3, y)  # the left third: Read-only
    time.sleep(1.0)  # a software-GL redraw
    asking.screenshot("ask-panel-read-only")
    assert asking.probe(PREFS + "result = prefs.agent_mode") == "READ_ONLY"
    read, refused = asking.call("get_objects_summary"), asking.call("undo_agent_steps", {"steps": 1})
    assert not read.is_error and _state(refused) == "read_only"
    asking.probe(PREFS + "prefs.agent_mode = 'ASK'\nresult = None")


def test_a_click_on_cancel_denies_the_call_the_cube_stays_and_no_agent_step_is_left(asking: GuiBlender) -> None:
    waiting = _ask(asking, "Cube")
    shot = asking.screenshot("ask-question")  # looked at: the code, numbered, above Allow and Cancel
    x, y, _ = _cancel_button(shot)
    asking.click(x, y)
    answer = waiting.result()
    assert _state(answer) == "denied_by_user", answer.text
    assert "Cube" in _objects(asking)
    assert asking.probe(STEPS) == 0


def test_a_click_on_allow_runs_the_call_and_answers_its_change_summary(asking: GuiBlender) -> None:
    waiting = _ask(asking, "Cube")
    x, y, width = _cancel_button(asking.screenshot("ask-allow"))
    asking.click(x + width + 9, y)  # Allow: the button beside Cancel, as wide
    answer = waiting.result()
    assert not answer.is_error, answer.text
    assert answer.data()["changes"]["removed"] == ["Cube"]
    assert "Cube" not in _objects(asking)


def test_allow_for_this_conversation_lets_the_next_call_through_without_a_question(asking: GuiBlender) -> None:
    waiting = _ask(asking, "Light")
    x, y, width = _cancel_button(asking.screenshot("ask-conversation"))
    asking.click(x - width // 2 + 8, y - 83)  # the box "Allow the rest of this conversation", three rows up
    asking.click(x + width + 9, y)
    assert not waiting.result().is_error
    unasked = asking.call("execute_blender_code", {"code": DELETE.format(name="Camera")})
    assert not unasked.is_error, unasked.text
    assert _objects(asking).isdisjoint({"Light", "Camera"})


def test_an_unanswered_question_times_out_and_runs_nothing(asking: GuiBlender) -> None:
    # a switch of mode forgets the conversation allowed before: it is asked again
    asking.probe(PREFS + "prefs.ask_timeout = 10\nprefs.agent_mode = 'FULL'\nprefs.agent_mode = 'ASK'\nresult = None")
    subprocess.run(["xdotool", "mousemove", "512", "360"], env=asking.env, check=True, timeout=30)
    answer = asking.call("execute_blender_code", {"code": DELETE.format(name="Nothing")})
    assert _state(answer) == "confirmation_timed_out", answer.text
