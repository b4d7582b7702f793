"""Start and stop the bridge from the UI."""

from __future__ import annotations

import contextlib
import json

import bpy

from . import notes, prefs
from .errors import BridgeError
from .runtime import RUNTIME


class HERMES_BRIDGE_OT_start(bpy.types.Operator):
    """Start the loopback bridge and publish its runtime file"""

    bl_idname = "hermes_bridge.start"
    bl_label = "Start Bridge"

    def execute(self, context: bpy.types.Context) -> set[str]:
        try:
            bridge = RUNTIME.start(prefs.config())
        except BridgeError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        if bridge is None:
            self.report({"INFO"}, "The bridge restarts once the request that asked for it has answered")
            return {"FINISHED"}
        note = notes.takeover(bridge.publication)
        self.report({"WARNING"} if note else {"INFO"}, note or f"Bridge listening at {bridge.endpoint}")
        return {"FINISHED"}


class HERMES_BRIDGE_OT_stop(bpy.types.Operator):
    """Stop the bridge and remove its runtime file"""

    bl_idname = "hermes_bridge.stop"
    bl_label = "Stop Bridge"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return RUNTIME.bridge is not None

    def execute(self, context: bpy.types.Context) -> set[str]:
        RUNTIME.stop()
        self.report({"INFO"}, "Bridge stopped")
        return {"FINISHED"}


class _ToolButton:
    """A panel button that does what a tool does, with the same rules and refusals (`ToolHost.run_here`)."""

    tool = ""

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return RUNTIME.bridge is not None

    def run(self, arguments: dict[str, object]) -> set[str]:
        bridge = RUNTIME.bridge
        if bridge is None:
            return {"CANCELLED"}
        outcome = bridge.tool_host.run_here(self.tool, arguments)
        text = json.loads(outcome.content[-1]["text"])
        if outcome.is_error:
            self.report({"ERROR"}, text.get("error", "refused"))  # type: ignore[attr-defined]
            return {"CANCELLED"}
        said = text.get("changes", {}).get("said") or text.get("status_message") or "done"
        self.report({"INFO"}, said)  # type: ignore[attr-defined]
        return {"FINISHED"}


class HERMES_BRIDGE_OT_undo_agent_step(_ToolButton, bpy.types.Operator):
    """Take back the agent's last step (refused when your own edits came after it)"""

    bl_idname = "hermes_bridge.undo_agent_step"
    bl_label = "Undo the agent's last step"
    tool = "undo_agent_steps"

    def execute(self, context: bpy.types.Context) -> set[str]:
        return self.run({"steps": 1})


class HERMES_BRIDGE_OT_cancel_task(_ToolButton, bpy.types.Operator):
    """Stop this render task before its next frame (the frames written stay)"""

    bl_idname = "hermes_bridge.cancel_task"
    bl_label = "Cancel"
    tool = "cancel_render_frames_task"
    task_id: bpy.props.StringProperty()  # type: ignore[valid-type]

    def execute(self, context: bpy.types.Context) -> set[str]:
        return self.run({"task_id": self.task_id})


class HERMES_BRIDGE_OT_restore_checkpoint(_ToolButton, bpy.types.Operator):
    """Replace the scene with this checkpoint (the current state is saved as a rescue checkpoint first)"""

    bl_idname = "hermes_bridge.restore_checkpoint"
    bl_label = "Restore"
    tool = "restore_checkpoint"
    name: bpy.props.StringProperty()  # type: ignore[valid-type]

    def execute(self, context: bpy.types.Context) -> set[str]:
        return self.run({"name": self.name})


def schedule_auto_start() -> None:
    """Start the bridge a moment after Blender starts (when the preference says so).

    Persistent: Blender opening a .blend at launch (a double-click, "Open with") loads it before the
    event loop runs, and a load drops every timer registered without persistent=True.
    """
    if not bpy.app.timers.is_registered(auto_start):
        bpy.app.timers.register(auto_start, first_interval=1.0, persistent=True)


def auto_start() -> None:
    """Timer callback after startup: start the bridge if the preference says so."""
    settings = prefs.preferences()
    if settings is None or not settings.auto_start or RUNTIME.bridge is not None:
        return None
    with contextlib.suppress(BridgeError):  # the runtime logged it, and the panel shows it
        RUNTIME.start(prefs.config())
    return None
