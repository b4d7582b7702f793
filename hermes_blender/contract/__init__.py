"""The Hermes application contract, split as Hermes splits it.

declaration (data: what plugin.json declares) | requirements (policy) | locate/host (I/O:
where the app is, its version, pids, sessions) | liveness (the runtime file) | status (the
composition: one state, one user action, one retry policy) | redact (secrets out of output).
"""

DECLARED_PATH = "~/AppData/Local/Blender/server.json"
"""Where the runtime file is declared (plugin.json's liveness path and the add-on's constant: a test holds all three
equal). Kept here, apart from the parsers, for the command line's defaults: `hermes-blender mcp` answers a client's
`initialize` before the contract's machinery is loaded."""
DECLARED_LAB_PATH = "~/AppData/Local/Blender/lab/server.json"
"""Where the Blender Lab listener's own runtime file is declared (plugin.json's `blender_lab` liveness and the
add-on's constant): published only while that listener runs."""
