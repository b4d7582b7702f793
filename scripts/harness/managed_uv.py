"""Runs INSIDE the real Hermes's venv: give Hermes's package manager the `uv` it would have downloaded.

Hermes resolves a bare `uv` in a plugin's stdio command to the copy its package manager (PM) keeps, never the
user's; PM downloads it (uv and the Python it pins) from GitHub or Nous's mirror on first use, which these
machines cannot reach. This asks Hermes's own PM where its store is, which versions and artifacts its lock pins
for this machine, then links this machine's `uv`/`uvx` and Python there and records them in PM's facts file as
PM records an install. Nothing of Hermes is copied; Hermes's own resolution then finds them.

Usage: python managed_uv.py HERMES_HOME UV   (prints the managed uv's path; a `uvx` beside UV is linked too)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> int:
    from pm.lock import SCHEMA
    from pm.paths import facts_path, lockfile_path, store_root
    from pm.store import current_target

    store, target = store_root(), current_target()
    assert store.is_relative_to(Path(sys.argv[1]).resolve()), f"PM's store {store} is not under HERMES_HOME"
    pinned = json.loads(lockfile_path().read_text(encoding="utf-8"))["packages"]
    uv = Path(sys.argv[2])
    uvx = uv.with_name("uvx")
    links = {
        "uv": {"uv": str(uv), **({"uvx": str(uvx)} if uvx.is_file() else {})},
        "python": {"bin/python3": sys.executable},
    }
    facts = {}
    for package, files in links.items():
        entry = f"{package}-{pinned[package]['version']}-{target}"
        for relative, source in files.items():
            link = store / entry / relative
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(source)
        facts[package] = {
            "entry": entry,
            "version": pinned[package]["version"],
            "target": target,
            "artifacts": [pinned[package]["artifacts"][target]["sha256"]],
        }
    facts_path().write_text(json.dumps({"schema": SCHEMA, "packages": facts}), encoding="utf-8")

    from pm.install import uv_launcher

    print(uv_launcher("uv"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
