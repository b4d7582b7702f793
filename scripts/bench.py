#!/usr/bin/env python3
"""`uv run scripts/bench.py [--X-only]`: the benchmark (the package scripts/benchmark/), run as the docs name it."""

import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # the add-on's and the toolkit's sources, then the package

if __name__ == "__main__":
    runpy.run_module("benchmark", run_name="__main__", alter_sys=True)
