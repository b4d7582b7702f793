"""Hermes Bridge: serve this Blender to local AI agents over a loopback MCP endpoint.

Registration only: no work happens at import time, and every submodule is imported inside
register(), so the network layer stays importable (and testable) without Blender.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial
from typing import Any

_cli_handle: Any = None


def _classes() -> tuple[type, ...]:
    from . import asking, operators, prefs, ui

    return (
        prefs.HermesBridgePreferences,
        asking.HERMES_BRIDGE_OT_question,
        operators.HERMES_BRIDGE_OT_start,
        operators.HERMES_BRIDGE_OT_stop,
        operators.HERMES_BRIDGE_OT_undo_agent_step,
        operators.HERMES_BRIDGE_OT_cancel_task,
        operators.HERMES_BRIDGE_OT_restore_checkpoint,
        ui.HERMES_BRIDGE_PT_panel,
        ui.HERMES_BRIDGE_PT_agent,
    )


def register() -> None:
    """All or nothing: a step that fails undoes the ones before it, so a retry starts clean."""
    global _cli_handle
    import bpy

    from . import asking, cli, operators
    from .agent_history import MARK, MARK_DESCRIPTION

    undo: list[Callable[[], object]] = []
    try:
        for cls in _classes():
            bpy.utils.register_class(cls)
            undo.append(partial(bpy.utils.unregister_class, cls))
        # the agent's undo mark, registered so the interface shows it only with Developer Extras on
        setattr(bpy.types.Scene, MARK, bpy.props.StringProperty(options={"HIDDEN"}, description=MARK_DESCRIPTION))
        undo.append(partial(delattr, bpy.types.Scene, MARK))
        _cli_handle = bpy.utils.register_cli_command(cli.COMMAND, cli.run)
        undo.append(partial(bpy.utils.unregister_cli_command, _cli_handle))
        if not bpy.app.background:
            bpy.app.timers.register(asking.look, first_interval=asking.LOOK, persistent=True)
            undo.append(partial(_unregister_timer, asking.look))
            operators.schedule_auto_start()
    except BaseException:
        _cli_handle = None
        for step in reversed(undo):
            with contextlib.suppress(Exception):
                step()
        raise


def _unregister_timer(timer: Callable[[], float]) -> None:
    import bpy

    if bpy.app.timers.is_registered(timer):
        bpy.app.timers.unregister(timer)


def unregister() -> None:
    global _cli_handle
    import bpy

    from . import asking, operators
    from .agent_history import MARK
    from .runtime import RUNTIME
    from .tools import scene_index

    _unregister_timer(asking.look)
    RUNTIME.stop()
    scene_index.uninstall()  # Blender's handler lists outlive the add-on
    if bpy.app.timers.is_registered(operators.auto_start):
        bpy.app.timers.unregister(operators.auto_start)
    if _cli_handle is not None:
        bpy.utils.unregister_cli_command(_cli_handle)
        _cli_handle = None
    if hasattr(bpy.types.Scene, MARK):
        delattr(bpy.types.Scene, MARK)
    for cls in reversed(_classes()):
        bpy.utils.unregister_class(cls)
