"""Network side of the bridge: sockets, framing, protocol and the runtime file.

Nothing under this package imports bpy, so it can be tested fast without Blender.
Threads here only parse, authenticate and hand work to a ToolHost.
"""
