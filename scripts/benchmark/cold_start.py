"""`--cold-start-only`: `hermes-blender mcp`'s start to its initialize answer, beside the minimal SDK stdio server."""

from __future__ import annotations

import compileall
import json
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from . import ROOT
from .measure import percentiles

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
}


def compiled(*folders: Path) -> None:
    """Write the bytecode caches every start after a user's first finds (Python writes them on the first import,
    Blender too for add-ons), for `folders` and the installed packages (bpy's own scripts, the SDK), so that no
    start on either side is measured compiling sources: a shell may set PYTHONDONTWRITEBYTECODE (this machine's
    does), and then each start would compile every module it imports."""
    for folder in folders:
        compileall.compile_dir(folder, quiet=1, workers=0)
    for installed in {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}:
        compileall.compile_dir(installed, quiet=2, workers=0)  # a package's test data or templates may not compile


def cold_start(command: list[str]) -> float:
    """Seconds from starting a stdio server to its `initialize` answer (stdin then closed: it ends)."""
    began = time.perf_counter()
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    server.stdin.flush()
    answer = server.stdout.readline()
    took = time.perf_counter() - began
    server.stdin.close()
    server.wait(30)
    assert b'"result"' in answer, answer
    return took


def cold_starts(runs: int) -> dict[str, dict[str, float]]:
    """`hermes-blender mcp` and the minimal SDK server, alternated run by run: ours as a client starts it (the
    console script `connect` writes into its config, a Python file run by this interpreter), the floor as
    `python <file>`.

    Both start from bytecode caches (`compiled`). Start-up is CPU work that noise only lengthens, so the low tail
    (p10, the best run) is reported beside the median: on shared cores the median alone moves by 10% between two
    runs."""
    compiled(ROOT / "hermes_blender")
    ours = [shutil.which("hermes-blender", path=str(Path(sys.executable).parent)) or "hermes-blender", "mcp"]
    floor = [sys.executable, str(ROOT / "scripts" / "minimal_stdio_server.py")]
    samples: dict[str, list[float]] = {"hermes-blender mcp": [], "minimal SDK server": []}
    commands = {"hermes-blender mcp": ours, "minimal SDK server": floor}
    for run in range(runs):  # which starts first alternates too: the second may find the disk cache warmer
        for name in sorted(commands, reverse=bool(run % 2)):
            samples[name].append(cold_start(commands[name]))
    return {
        name: {**percentiles(values), "p10": sorted(values)[len(values) // 10] * 1000, "best": min(values) * 1000}
        for name, values in samples.items()
    }


def cold_start_lines(rows: dict[str, dict[str, float]]) -> list[str]:
    floor = rows["minimal SDK server"]
    return [
        f"{name:<22} "
        + "  ".join(f"{stat} {row[stat]:6.1f} ms ({row[stat] / floor[stat]:.2f}x)" for stat in ("p50", "p10", "best"))
        + f"  {row['n']} runs"
        for name, row in rows.items()
    ]
