"""The question put to the person at Blender when the agent's mode is `ask`: a dialog over the window.

A timer looks for a waiting question (`consent.py`) and opens one dialog at a time, in the order the calls came:
what the agent wants to run (the tool, its arguments in a line, the code itself for code), with Allow, a box for
"the rest of this conversation", and Cancel, which denies (so does closing the dialog any other way). The calling
thread waits meanwhile; Blender's UI and the timer pump go on.
"""

from __future__ import annotations

import json

import bpy

from .consent import Answer, Question
from .runtime import RUNTIME

LOOK = 0.2
"""Seconds between two looks for a question to show."""
CODE_LINES = 40
"""Lines of code the dialog shows; the rest is counted (the dialog is as tall as its lines)."""
WIDTH = 96
"""Characters of a line the dialog shows."""


def look() -> float:
    """Timer: open the dialog for the oldest waiting question, when none is open."""
    bridge = RUNTIME.bridge
    if bridge is None:
        return LOOK
    question = bridge.execution.consent.next_to_show()
    if question is not None:
        window = next(iter(bpy.context.window_manager.windows), None)
        try:
            assert window is not None, "no window to ask in"
            with bpy.context.temp_override(window=window, screen=window.screen):
                bpy.ops.hermes_bridge.question("INVOKE_DEFAULT", number=question.number)
        except (AssertionError, RuntimeError):
            question.shown = False  # a modal operation holds the window: ask again at the next look
    return LOOK


def _waiting(number: int) -> Question | None:
    bridge = RUNTIME.bridge
    if bridge is None:
        return None
    return next((question for question in bridge.execution.consent.waiting() if question.number == number), None)


def _cut(text: str) -> str:
    """A row of the dialog: what does not fit is counted, never dropped unsaid (code can hide past the edge, behind
    a harmless start and a run of spaces)."""
    if len(text) <= WIDTH:
        return text
    kept = text[: WIDTH - len("… (+ characters not shown)") - len(str(len(text)))]
    return f"{kept}… (+{len(text) - len(kept)} characters not shown)"


class HERMES_BRIDGE_OT_question(bpy.types.Operator):
    """The agent asks to change this Blender: allow it, or deny it"""

    bl_idname = "hermes_bridge.question"
    bl_label = "The agent asks"
    bl_options = {"INTERNAL"}

    number: bpy.props.IntProperty(options={"HIDDEN", "SKIP_SAVE"})  # type: ignore[valid-type]
    for_conversation: bpy.props.BoolProperty(  # type: ignore[valid-type]
        name="Allow the rest of this conversation", description="Do not ask again until this agent's session ends"
    )
    reason: bpy.props.StringProperty(  # type: ignore[valid-type]
        name="Reason", description="Told to the agent when you cancel (deny)"
    )

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        question = _waiting(self.number)
        if question is None:
            return {"CANCELLED"}
        return context.window_manager.invoke_props_dialog(
            self, width=720, title=f"The agent asks: {question.call.title}", confirm_text="Allow", cancel_default=True
        )

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        question = _waiting(self.number)
        if question is None:
            layout.label(text="This question ended (timed out, or its agent left): nothing will run.", icon="INFO")
            return
        call = question.call
        arguments = {key: value for key, value in call.arguments.items() if key != "code"}
        layout.label(text=_cut(f"{call.tool}({json.dumps(arguments)[1:-1]})"), icon="TOOL_SETTINGS")
        if call.code is not None:
            lines = call.code.splitlines() or [""]
            box = layout.box().column(align=True)
            for number, line in enumerate(lines[:CODE_LINES], 1):
                box.label(text=_cut(f"{number:3d}  {line.expandtabs(4)}"))
            if len(lines) > CODE_LINES:
                box.label(text=f"… and {len(lines) - CODE_LINES} more lines (allow only code you have read)")
        if call.conversation is not None:
            layout.prop(self, "for_conversation")
        layout.prop(self, "reason", text="Reason if you deny")
        layout.label(text="Cancel denies: nothing runs and the agent hears why.")

    def execute(self, context: bpy.types.Context) -> set[str]:
        answer = Answer.ALLOW_CONVERSATION if self.for_conversation else Answer.ALLOW
        if not self._answer(answer, ""):
            self.report({"WARNING"}, "That question had already ended (timed out, or its agent left); nothing ran")
        return {"FINISHED"}

    def cancel(self, context: bpy.types.Context) -> None:
        self._answer(Answer.DENY, self.reason.strip())

    def _answer(self, answer: Answer, reason: str) -> bool:
        bridge = RUNTIME.bridge
        return bridge is not None and bridge.execution.consent.answer(self.number, answer, reason)
