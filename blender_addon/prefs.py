"""Add-on preferences: the port and whether the bridge starts with Blender."""

from __future__ import annotations

import bpy

from . import service


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

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        layout.prop(self, "http_port")
        layout.prop(self, "auto_start")
        layout.label(text="The bridge listens on 127.0.0.1 only. Agents find it through the runtime file:")
        layout.label(text=str(service.runtime_file.expand_declared_path()))


def preferences() -> HermesBridgePreferences | None:
    addon = bpy.context.preferences.addons.get(__package__)
    return addon.preferences if addon is not None else None  # type: ignore[return-value]


def config() -> service.BridgeConfig:
    prefs = preferences()
    return service.BridgeConfig(port=prefs.http_port if prefs is not None else 0)
