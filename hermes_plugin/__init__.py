"""Agent-side toolkit for blender-bridge."""
