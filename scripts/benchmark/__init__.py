"""Latency and throughput of the bridge, beside the loopback floors measured in the same run.

Run with `uv run scripts/bench.py` (add `--json` for machine-readable output, `--quick` for
fewer iterations). Every path is timed against its own floor: the Lab wire against a raw TCP
echo with one connection per request, MCP over keep-alive HTTP against a raw HTTP echo.

`--python PY` (repeatable) runs the whole benchmark under other interpreters, each a Blender
line's venv from scripts/bpy_line.sh (e.g. `.venvs/bpy-4.5.15/bin/python`), and prints one
row per line, so one run compares them on the same machine.

One module per table (its `--X-only` flag in `__main__`), the floors and the alternation in `measure`; the
package imports nothing from tests/ (tests/net/test_import_graph.py holds it, and that it has no cycle).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "scripts" / "bench.py"
"""The command the docs name; a second process of the benchmark (a flood, another interpreter) runs it."""
