"""Add-on preferences: the port, whether the bridge starts with Blender, and what the agent may do."""

from __future__ import annotations

from typing import TYPE_CHECKING

import bpy

from .agent_mode import AgentMode
from .consent import ASK_TIMEOUT
from .defaults import LAB_PORT
from .owner_files.runtime_file import expand_declared_path

if TYPE_CHECKING:
    from .service import BridgeConfig


AGENT_MODES = [
    (
        AgentMode.READ_ONLY.name,
        "Read-only",
        "Agents look, never change: code, edits, renders to files, restores, undo and redo are refused",
    ),
    (
        AgentMode.ASK.name,
        "Ask first",
        "Every change an agent asks for waits for your Allow (a dialog here, or the agent's own prompt)",
    ),
    (AgentMode.FULL.name, "Full", "Agents may do everything without asking"),
]
"""The modes as the person reads them (the model reads `agent_mode.MEANINGS`)."""


def _switch_running_bridge(prefs: HermesBridgePreferences, context: bpy.types.Context) -> None:
    """The person's choice holds for the running bridge at once (the panel and the preferences show the same)."""
    from .runtime import RUNTIME  # the bridge's module, loaded only once a bridge runs

    bridge = RUNTIME.bridge
    if bridge is not None:
        bridge.execution.consent.switch(AgentMode[prefs.agent_mode])


def _retime_running_bridge(prefs: HermesBridgePreferences, context: bpy.types.Context) -> None:
    """A new timeout holds for the questions asked from now on."""
    from .runtime import RUNTIME

    bridge = RUNTIME.bridge
    if bridge is not None:
        bridge.execution.consent.timeout = float(prefs.ask_timeout)


class HermesBridgePreferences(bpy.types.AddonPreferences):
    bl_idname = __package__

    http_port: bpy.props.IntProperty(  # type: ignore[valid-type]
        name="MCP port",
        description="Port of the MCP endpoint on 127.0.0.1; 0 lets the operating system choose a free one",
        default=0,
        min=0,
        max=65535,
    )
    auto_start: bpy.props.BoolProperty(  # type: ignore[valid-type]
        name="Start with Blender",
        description="Start the bridge when Blender starts (interactive sessions only)",
        default=True,
    )
    allow_code: bpy.props.BoolProperty(  # type: ignore[valid-type]
        name="Allow code execution",
        description="Let agents run Python in Blender (execute_blender_code and the Blender Lab listener). Not a sandbox",
        default=True,
    )
    agent_mode: bpy.props.EnumProperty(  # type: ignore[valid-type]
        name="Agent may",
        description="What agents may do in this Blender; only you change it, here or in the Hermes sidebar panel",
        items=AGENT_MODES,
        default=AgentMode.FULL.name,
        update=_switch_running_bridge,
    )
    ask_timeout: bpy.props.IntProperty(  # type: ignore[valid-type]
        name="Question timeout (s)",
        description="Seconds a question waits for your answer before the agent hears it timed out",
        default=int(ASK_TIMEOUT),
        min=10,
        max=3600,
        update=_retime_running_bridge,
    )
    lab_enabled: bpy.props.BoolProperty(  # type: ignore[valid-type]
        name="Blender Lab listener",
        description=(
            "Also serve the official Blender Lab MCP server's bridge protocol (for the blender_lab server). It runs "
            "code without a token, so it admits only processes of your own OS user"
        ),
        default=False,
    )
    lab_port: bpy.props.IntProperty(  # type: ignore[valid-type]
        name="Blender Lab port",
        description="Port of the Blender Lab listener on 127.0.0.1 (the official server expects 9876)",
        default=LAB_PORT,
        min=1024,
        max=65535,
    )
    lab_require_token: bpy.props.BoolProperty(  # type: ignore[valid-type]
        name="Require token",
        description=(
            "Refuse Blender Lab requests that do not open with the runtime file's token "
            "(the official server cannot send one)"
        ),
        default=False,
    )

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        layout.prop(self, "http_port")
        layout.prop(self, "auto_start")
        layout.prop(self, "allow_code")
        layout.label(text="Agent may:")
        layout.row().prop(self, "agent_mode", expand=True)
        layout.prop(self, "ask_timeout")
        layout.prop(self, "lab_enabled")
        row = layout.row()
        row.enabled = self.lab_enabled
        row.prop(self, "lab_port")
        row.prop(self, "lab_require_token")
        layout.label(text="The bridge listens on 127.0.0.1 only. Agents find it through the runtime file:")
        layout.label(text=str(expand_declared_path()))


def preferences() -> HermesBridgePreferences | None:
    addon = bpy.context.preferences.addons.get(__package__)
    return addon.preferences if addon is not None else None  # type: ignore[return-value]


def config() -> BridgeConfig:
    """The bridge configuration the preferences describe, for this kind of session."""
    from . import service  # the bridge's module, when a bridge is about to start: never at the preferences' load

    prefs = preferences()
    mode = service.Mode.EMBEDDED if bpy.app.background else service.Mode.GUI  # `--command` sets BACKGROUND
    if prefs is None:
        return service.BridgeConfig(mode=mode)
    return service.BridgeConfig(
        port=prefs.http_port,
        lab_port=prefs.lab_port if prefs.lab_enabled else None,
        lab_require_token=prefs.lab_require_token,
        allow_code=prefs.allow_code,
        agent_mode=AgentMode[prefs.agent_mode],
        ask_timeout=float(prefs.ask_timeout),
        mode=mode,
    )
