"""The sidebar panel: bridge state and address, never the token."""

from __future__ import annotations

import time

import bpy

from . import notes
from .consent import Consent
from .prefs import preferences
from .runtime import RUNTIME


class HERMES_BRIDGE_PT_panel(bpy.types.Panel):
    bl_label = "Hermes Bridge"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Hermes"

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        bridge = RUNTIME.bridge
        if bridge is None:
            layout.label(text="Stopped", icon="UNLINKED")
            if RUNTIME.last_error:
                for line in _wrap(RUNTIME.last_error):
                    layout.label(text=line, icon="ERROR")
            layout.operator("hermes_bridge.start", icon="PLAY")
            return
        layout.label(text="Running", icon="LINKED")
        layout.label(text=bridge.endpoint)
        self._agent_mode(layout, bridge.execution.consent)
        layout.label(text=f"Clients connected: {bridge.open_connections}")
        layout.label(text=f"Runtime file: {bridge.runtime_file}")
        if bridge.log_file is not None:
            layout.label(text=f"Log: {bridge.log_file}")
        if bridge.lab_address is not None:
            layout.label(text=f"Blender Lab: {bridge.lab_address}")
        elif bridge.lab_error is not None:
            for line in _wrap(bridge.lab_error):
                layout.label(text=line, icon="ERROR")
        else:
            for line in _wrap("Blender Lab listener: off (for blender_lab, turn it on in the add-on's preferences)"):
                layout.label(text=line)
        note = notes.reachability(bridge.runtime_file, bridge.pid) or notes.takeover(bridge.publication)
        if note:
            for line in _wrap(note):
                layout.label(text=line, icon="INFO")
        layout.operator("hermes_bridge.stop", icon="PAUSE")

    @staticmethod
    def _agent_mode(layout: bpy.types.UILayout, consent: Consent) -> None:
        """What the agent may do, switched here with one click; and the calls waiting for the person's answer."""
        prefs = preferences()
        if prefs is not None and prefs.agent_mode == consent.mode.name:
            layout.label(text="Agent may:")
            layout.row().prop(prefs, "agent_mode", expand=True)
        else:  # started with `--mode`, or without the add-on's preferences: shown, switched where it was set
            layout.label(text=f"Agent may: {consent.mode.value}")
        waiting = consent.waiting()
        if waiting:
            now = time.monotonic()
            for question in waiting:
                layout.label(text=f"Asks: {question.call.tool} ({now - question.asked_at:.0f} s)", icon="QUESTION")


SHOWN = 5
"""Agent steps and checkpoints the panel lists, newest first."""


class HERMES_BRIDGE_PT_agent(bpy.types.Panel):
    """What the agent did, what it is rendering, and the checkpoints: with the buttons the tools have."""

    bl_label = "Agent's changes"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Hermes"
    bl_parent_id = "HERMES_BRIDGE_PT_panel"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return RUNTIME.bridge is not None

    def draw(self, context: bpy.types.Context) -> None:
        bridge = RUNTIME.bridge
        if bridge is None:
            return
        execution = bridge.execution
        layout = self.layout
        steps = execution.history.done
        if steps:
            layout.operator("hermes_bridge.undo_agent_step", icon="LOOP_BACK")
        for step in reversed(steps[-SHOWN:]):
            brief = step.brief()
            box = layout.box()
            box.label(text=f"{brief['step']}. {step.title}, {str(brief['at'])[11:]}", icon="TOOL_SETTINGS")
            for line in _wrap(step.summary["said"])[:3]:
                box.label(text=line)
        undone = len(execution.history.undone)
        if undone:
            layout.label(text=f"{undone} step{'s' if undone > 1 else ''} taken back (the agent can redo)")
        elif not steps:
            for line in _wrap(execution.history.ended or "No changes by the agent yet"):
                layout.label(text=line)
        for task in execution.tasks.working_tasks():
            snapshot = task.snapshot()
            row = layout.row()
            row.label(text=f"Rendering {snapshot['done']} of {snapshot['count']} frames", icon="RENDER_ANIMATION")
            row.operator("hermes_bridge.cancel_task").task_id = snapshot["task_id"]
        for record in execution.checkpoints.listed()[:SHOWN]:
            row = layout.row()
            row.label(
                text=f"{record.name} ({time.strftime('%H:%M', time.localtime(record.saved_at))})", icon="FILE_BLEND"
            )
            row.operator("hermes_bridge.restore_checkpoint").name = record.name


def _wrap(text: str, width: int = 48) -> list[str]:
    lines: list[str] = []
    current = ""
    for word in text.split():
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}".strip()
    return lines + ([current] if current else [])
