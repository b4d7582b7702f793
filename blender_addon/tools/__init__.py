"""The tool catalogue: functions of Blender state returning JSON-able data.

Nothing here touches sockets; every `run` executes on Blender's main thread via dispatch.
"""

from __future__ import annotations

from .base import Image, Tool
from .scene import GET_OBJECTS_SUMMARY

CATALOGUE: dict[str, Tool] = {tool.name: tool for tool in (GET_OBJECTS_SUMMARY,)}

__all__ = ["CATALOGUE", "Image", "Tool"]
