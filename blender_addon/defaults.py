"""The bridge's defaults the preferences show before any bridge runs (no bpy, nothing of the bridge's loaded)."""

LAB_PORT = 9876
"""The Blender Lab listener's port: the official server's `BLENDER_MCP_PORT` default."""
