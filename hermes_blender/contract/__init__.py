"""The Hermes application contract, split as Hermes splits it.

declaration (data: what plugin.json declares) | requirements (policy) | locate/host (I/O:
where the app is, its version, pids, sessions) | liveness (the runtime file) | status (the
composition: one state, one user action, one retry policy) | redact (secrets out of output).
"""
