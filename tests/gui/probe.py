"""Loaded by the GUI Blender under test (`--python`): runs what the tests drop in its inbox.

The bridge cannot be asked to stop, disable or quit itself over its own connection, and some
checks (undo, the timer pump) need Blender's main thread between requests. So a persistent
timer looks in `$HERMES_GUI_PROBE/in` for `<name>.py`, runs it on the main thread with `bpy`
in scope, and writes `<name>.json`: `{"result": ...}` or `{"error": "..."}`. Test harness only.
"""

import json
import os
import traceback
from pathlib import Path

import bpy

INBOX = Path(os.environ["HERMES_GUI_PROBE"]) / "in"


def _tick() -> float:
    for script in sorted(INBOX.glob("*.py")):
        namespace = {"bpy": bpy}
        try:
            exec(compile(script.read_text(), script.name, "exec"), namespace)
            answer = {"result": namespace.get("result")}
        except Exception:
            answer = {"error": traceback.format_exc()}
        script.unlink()
        out = script.with_suffix(".json.tmp")
        out.write_text(json.dumps(answer, default=repr))
        out.replace(script.with_suffix(".json"))
    return 0.02


INBOX.mkdir(parents=True, exist_ok=True)
bpy.app.timers.register(_tick, first_interval=0.0, persistent=True)
