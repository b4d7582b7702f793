"""The benchmark's command line: the flags choose the tables (`uv run scripts/bench.py --help`)."""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_blender.contract.liveness import RuntimeFileSpec, read_live_endpoint
from hermes_blender.headless import HeadlessBlender
from hermes_blender.lab import lab_exchange, lab_execute

from . import ENTRY, ROOT
from . import __doc__ as PACKAGE_DOC
from .api import api_lines, api_table
from .cold_start import cold_start_lines, cold_starts
from .farm import farm_lines, farm_table
from .hermes import hermes_beside_official, hermes_lines
from .history import history_lines, history_table
from .latency import (
    STDIO_ROW,
    beside_a_task,
    cancel_render_to_stop,
    cancel_to_stop,
    dispatch_hop,
    official_client_calls,
    stdio_beside_direct,
    time_to_ready,
)
from .load import flood, throughput, under_flood
from .measure import (
    DISCOVER,
    STREAMED,
    STREAMED_HEADERS,
    SUMMARY,
    Floor,
    InlineFloor,
    KeepAlive,
    http_echo,
    machine,
    nul_echo,
    paired,
)
from .modes import modes_lines, modes_table
from .official import official_lines, official_stack
from .scale import scale_lines, scale_table
from .strangers import stranger_lines, under_strangers

ONLY = {
    "--official-only": "with --official-stack: only the official stack's rows",
    "--hermes-only": "with --official-stack: only a Hermes call through the plugin beside the official stack, in one Hermes",
    "--scale-only": "only the scale table (big scenes), a Blender per row",
    "--history-only": "only the change summaries' and checkpoints' table, a Blender per row",
    "--cold-start-only": "only `hermes-blender mcp`'s start to its initialize answer, beside the minimal SDK stdio server",
    "--farm-only": "only the farm rows: `farm run` of a bundle beside `blender -b FILE -a`, calls during a farm run",
    "--api-only": "only the API look-up's and a successful code call's cost",
    "--modes-only": "only the agent's mode's cost in full mode (the consent check)",
    "--strangers-only": "only the honest calls beside another process's attacks",
}
"""The flags that choose one table (or one row) alone, and what each runs."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench.py", description=PACKAGE_DOC.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    parser.add_argument(
        "--python", action="append", type=Path, help="run under this interpreter (a bpy line's venv); repeat to compare"
    )
    parser.add_argument(
        "--official-stack",
        type=Path,
        metavar="CHECKOUT",
        help="also run the official Blender Lab stack from this source checkout (upstream 4309a39), beside ours",
    )
    for flag, text in ONLY.items():
        parser.add_argument(flag, action="store_true", help=text)
    parser.add_argument(
        "--million", action="store_true", help="add 1,000,000-object scenes to the scale table (minutes, about 4 GiB)"
    )
    parser.add_argument("--flood", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument(
        "--stranger-user",
        metavar="NAME",
        help="the attacks are this OS user's (an existing account; run as root, e.g. after `useradd -M NAME`)",
    )
    args = parser.parse_args(argv)
    quick = args.quick

    def strangers() -> list[dict[str, Any]]:
        with tempfile.TemporaryDirectory() as folder, HeadlessBlender(Path(folder) / "server.json") as blender:
            assert blender.endpoint is not None
            endpoint = blender.endpoint
            n = 50 if quick else 200
            return under_strangers(blender.runtime_file, endpoint.port, endpoint.headers(), n, args.stranger_user)

    alone: dict[str, tuple[Callable[[], Any], Callable[[Any], list[str]]]] = {
        "strangers_only": (strangers, stranger_lines),
        "scale_only": (
            lambda: scale_table(([1_000, 10_000] if quick else [1_000, 10_000, 100_000]) + [1_000_000] * args.million),
            scale_lines,
        ),
        "history_only": (
            lambda: history_table([1_000, 100_000] + [1_000_000] * args.million, 10 if quick else 30),
            history_lines,
        ),
        "cold_start_only": (lambda: cold_starts(5 if quick else 41), cold_start_lines),
        "api_only": (lambda: api_table(100 if quick else 1000), api_lines),
        "modes_only": (lambda: modes_table(200 if quick else 2000), modes_lines),
        "farm_only": (lambda: farm_table(50 if quick else 200), farm_lines),
    }
    for flag, (measured, lines) in alone.items():
        if getattr(args, flag):
            table = measured()
            print(json.dumps(table, indent=2) if args.json else "\n".join(lines(table)))
            return 0
    if args.flood is not None:
        flood(args.flood)
        return 0
    if args.python:
        return compare_lines(args.python, quick=args.quick, as_json=args.json)
    if args.hermes_only:
        if args.official_stack is None:
            parser.error("--hermes-only needs --official-stack CHECKOUT")
        stats = hermes_beside_official(args.official_stack.resolve(), 30 if args.quick else 100)
        print(json.dumps(stats, indent=2) if args.json else "\n".join(hermes_lines(stats)))
        return 0
    if args.official_only:
        if args.official_stack is None:
            parser.error("--official-only needs --official-stack CHECKOUT")
        rows = official_stack(args.official_stack.resolve(), 100 if args.quick else 500, 3 if args.quick else 10)
        rows.update(hermes_beside_official(args.official_stack.resolve(), 30 if args.quick else 100))
        report = {"machine": machine(), "latency": rows}
        print(json.dumps(report, indent=2) if args.json else "\n".join(official_lines(report)))
        return 0
    n = 200 if args.quick else 1000
    report: dict[str, Any] = {"machine": machine(), "latency": {}, "throughput": [], "scale": []}
    latency = report["latency"]

    tcp_floor, threaded_floor, http_floor = InlineFloor(), Floor(nul_echo), Floor(http_echo)
    lab_payload = json.dumps({"type": "execute", "code": "result = {}", "strict_json": True}).encode() + b"\0"
    tcp = lambda: lab_exchange(tcp_floor.port, lab_payload)  # noqa: E731
    echo = KeepAlive(http_floor.port, {})
    http = lambda: echo.post("/mcp", SUMMARY)  # noqa: E731
    floors = {
        tcp: "floor: raw TCP echo, one connection per request, answered inline by one thread",
        http: "floor: raw HTTP keep-alive echo",
    }

    def measure(name: str, floor: Callable[[], object], path: Callable[[], object], count: int = n) -> None:
        floor_stats, path_stats = paired(floor, path, count)
        latency.setdefault(floors[floor], floor_stats)
        latency[name] = {**path_stats, "ratio_p50": path_stats["p50"] / floor_stats["p50"]}

    with tempfile.TemporaryDirectory() as folder:
        runtime_file = Path(folder) / "server.json"
        with HeadlessBlender(runtime_file, lab_port=0):
            endpoint = read_live_endpoint(RuntimeFileSpec(path=str(runtime_file)))
            port = int(endpoint.url.rsplit(":", 1)[1].split("/")[0])
            lab_port = int(json.loads(runtime_file.read_text())["lab"].rsplit(":", 1)[1])
            headers = endpoint.headers()
            measure(
                "floor: raw TCP echo, one connection per request, a thread per connection",
                tcp,
                lambda: lab_exchange(threaded_floor.port, lab_payload),
            )
            measure("Lab execute (result = {})", tcp, lambda: lab_exchange(lab_port, lab_payload))
            # Agent-written code is new each time, so the add-on's compile cache never helps it: measured apart.
            fresh = (
                b'{"type":"execute","code":"result = {}  # %d","strict_json":true}\0' % n for n in itertools.count()
            )
            measure("Lab execute (result = {}, new code each call)", tcp, lambda: lab_exchange(lab_port, next(fresh)))
            summary_code = "import bpy\nresult = {'names': sorted(o.name for o in bpy.context.scene.objects)}"
            measure("Lab execute (object names)", tcp, lambda: lab_execute(lab_port, summary_code))
            link = KeepAlive(port, headers)
            measure("MCP tools/call get_objects_summary, keep-alive HTTP", http, lambda: link.post("/mcp", SUMMARY))
            # The same call asking for progress: answered as an event stream (a small call hears no progress).
            measure(
                "MCP tools/call get_objects_summary with a progressToken (event stream), keep-alive HTTP",
                http,
                lambda: link.post("/mcp", STREAMED, STREAMED_HEADERS),
            )
            # The same transport and envelope without a tool: what HTTP, auth and JSON-RPC cost apart from bpy.
            measure("MCP server/discover (no tool), keep-alive HTTP", http, lambda: link.post("/mcp", *DISCOVER))
            latency["MCP get_objects_summary, official client, 2026-07-28"] = official_client_calls(
                runtime_file, "2026-07-28", n // 4
            )
            latency["MCP get_objects_summary, official client, 2025-11-25 session"] = official_client_calls(
                runtime_file, "legacy", n // 4
            )
            for name in list(latency)[-2:]:
                latency[name]["ratio_p50"] = latency[name]["p50"] / latency[floors[http]]["p50"]
            latency[STDIO_ROW] = stdio_beside_direct(runtime_file, n // 4)
            latency["cancel: a client hangs up on a running script -> the next answer"] = cancel_to_stop(
                port, headers, 5 if args.quick else 20
            )
            latency["server/discover while a frame task renders (frames of about 100 ms)"] = beside_a_task(
                port, headers, 20 if args.quick else 100
            )
            latency["cancel: a frame range's stream closed -> the next answer (frame_p50: one frame)"] = (
                cancel_render_to_stop(port, headers, 5 if args.quick else 20)
            )
            for clients in (1, 4, 8):
                report["throughput"].append(throughput(port, headers, clients, n // 2))
            report["flood"] = under_flood(port, headers, n)
            report["strangers"] = under_strangers(
                runtime_file, port, headers, 50 if args.quick else 200, args.stranger_user
            )
            sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
            scale_sizes = sizes + ([1_000_000] if args.million else [])
    for floor in (tcp_floor, threaded_floor, http_floor):
        floor.close()
    report["scale"] = scale_table(scale_sizes)
    report["history"] = history_table([1_000, 100_000] + [1_000_000] * args.million, 10 if args.quick else 30)
    latency["thread -> main -> thread hop (dispatcher)"] = dispatch_hop(n)
    if args.official_stack is not None:
        latency.update(official_stack(args.official_stack.resolve(), n // 5, 3 if args.quick else 7))
        latency.update(hermes_beside_official(args.official_stack.resolve(), n // 10))
    report["time_to_ready"] = time_to_ready(3 if args.quick else 5)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


LINE_COLUMNS = {
    "Lab execute": "Lab execute (result = {})",
    "MCP keep-alive": "MCP tools/call get_objects_summary, keep-alive HTTP",
    "official client": "MCP get_objects_summary, official client, 2026-07-28",
}


def compare_lines(pythons: list[Path], *, quick: bool, as_json: bool) -> int:
    """The benchmark once per interpreter (one after the other, never overlapping), one row each."""
    reports = []
    for python in pythons:
        command = [str(python), str(ENTRY), "--json", *(["--quick"] if quick else [])]
        run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        if run.returncode != 0:
            print(f"bench: {python} failed:\n{run.stderr[-2000:]}", file=sys.stderr)
            return run.returncode
        reports.append(json.loads(run.stdout))
    if as_json:
        print(json.dumps(reports, indent=2))
        return 0
    header = f"{'Blender (bpy) / Python':<28}" + "".join(f"{name + ' p50 ms (x floor)':>32}" for name in LINE_COLUMNS)
    print(header + f"{'ready p50 ms':>14}")
    for report in reports:
        cells = []
        for key in LINE_COLUMNS.values():
            s = report["latency"][key]
            cells.append(f"{s['p50']:>20.3f} ({s['ratio_p50']:.2f}x)".rjust(32))
        line = f"{report['machine']['bpy']} / {report['machine']['python']}"
        print(f"{line:<28}{''.join(cells)}{report['time_to_ready']['p50']:>14.0f}")
    return 0


def render(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"machine: {m['cpu']}, {m['cores']} cores, {m['os']}, Python {m['python']}, bpy {m['bpy']}, mcp {m['mcp']}",
        "",
    ]
    width = max(64, *(len(name) for name in report["latency"]))
    lines.append(f"{'path':<{width}} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'x floor':>8}")
    for name, s in report["latency"].items():
        ratio = f"{s['ratio_p50']:.2f}" if "ratio_p50" in s else ""
        frame = f"  (one frame {s['frame_p50']:.0f} ms)" if "frame_p50" in s else ""
        if "vs_official_p50" in s:
            frame += f"  (ours/official: p50 {s['vs_official_p50']:.2f}x, p95 {s['vs_official_p95']:.2f}x)"
        lines.append(f"{name:<{width}} {s['p50']:>8.3f} {s['p95']:>8.3f} {s['p99']:>8.3f} {ratio:>8}{frame}")
    lines += ["", f"{'throughput (get_objects_summary, keep-alive HTTP)':<64} {'calls/s':>8} {'errors':>8}"]
    for t in report["throughput"]:
        lines.append(
            f"{str(t['clients']) + ' client(s) x ' + str(t['calls'] // t['clients']) + ' calls':<64} {t['per_second']:>8.0f} {t['errors']:>8}"
        )
    f = report["flood"]
    lines += ["", f"{'honest keep-alive client, get_objects_summary':<64} {'p50 ms':>8} {'p99 ms':>8} {'lost':>8}"]
    for key, label in (("without", "without a flood"), ("with", "under the worst no-token flood (a 2nd process)")):
        lines.append(f"{label:<64} {f[key]['p50']:>8.3f} {f[key]['p99']:>8.3f} {f[key]['lost']:>8}")
    lines.append(f"{'p99 under flood / p99 without':<64} {f['ratio_p99']:>8.2f}")
    rates = ", ".join(f"{rate:.0f} {kind}/s" for kind, rate in f["flood_per_second"].items())
    lines.append(f"the flood reached: {rates} (16 KiB header blocks refused; connections opened and closed)")
    lines += ["", *stranger_lines(report["strangers"])]
    r = report["time_to_ready"]
    lines += [
        "",
        f"time to ready (process start -> runtime file -> first answer): p50 {r['p50']:.0f} ms, max {r['p99']:.0f} ms (n={r['n']})",
        "",
    ]
    lines += scale_lines(report["scale"])
    lines += ["", *history_lines(report["history"])]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
