"""The MCP protocol versions the bridge speaks, the names of the per-request envelope, and the endpoint's path.

One module for the add-on and the toolkit: the toolkit loads this file from the add-on source it
ships (`hermes_blender/protocol.py`), so a new version is written down once. It imports nothing.
"""

STATELESS = "2026-07-28"
"""Every request carries its version and the client's capabilities (`_meta`); no session."""
HANDSHAKE = ("2025-03-26", "2025-06-18", "2025-11-25")
"""`initialize`, then a session, oldest first: the last is what a client that names no known version gets."""
SUPPORTED = (STATELESS, *reversed(HANDSHAKE))
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CONVERSATION = "io.github.hermes-blender/conversation"
"""A stateless client's conversation (the toolkit's relay sends one per process): what "Allow for this conversation"
remembers when the client has no MCP session."""
VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
"""A stateless request mirrors its method, and a tool call its tool's name, in these headers."""
ENDPOINT_PATH = "/mcp"
"""Where the bridge serves MCP: the runtime file names it (`endpoint_path`)."""
NAME_BEARING = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
"""Methods whose named parameter a stateless request mirrors in the Mcp-Name header (the client's and our side)."""
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The MCP tasks extension's identifier (SEP-2663), in capabilities and in `tasks/*` methods."""
