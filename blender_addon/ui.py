"""The sidebar panel: bridge state and address, never the token."""

from __future__ import annotations

import bpy

from . import notes
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
