"""A `blender` command line over Blender-as-a-module, enough for pytest-blender.

CI has no Blender binary, only the bpy wheel. This implements the part of Blender's command
line pytest-blender uses: `--version` (without importing bpy), `-b`, `--python FILE`,
`--python-expr EXPR`, `--python-exit-code N`, `--addons a,b`, a `.blend` to open, and `--`.
"""

from __future__ import annotations

import importlib.metadata
import runpy
import sys
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    if "--version" in argv[: argv.index("--") if "--" in argv else len(argv)]:
        print(f"Blender {importlib.metadata.version('bpy')}\n\tbuild: bpy module (blender_launcher)")
        return 0
    import bpy  # first: it puts Blender's own modules (addon_utils, ...) on the path

    # isort: split
    import addon_utils

    sys.argv = [sys.argv[0], *argv]  # scripts see Blender's whole command line, as in Blender
    exit_code_on_error = 0
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg == "--":
            break
        if arg in ("-b", "--background", "--factory-startup", "-noaudio", "--python-use-system-env"):
            index += 1
        elif arg == "--python-exit-code":
            exit_code_on_error = int(argv[index + 1])
            index += 2
        elif arg in ("--python", "-P", "--python-expr"):
            try:
                _run(arg, argv[index + 1])
            except SystemExit as exc:
                return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception:
                traceback.print_exc()
                if exit_code_on_error:
                    return exit_code_on_error
            index += 2
        elif arg == "--addons":
            for name in argv[index + 1].split(","):
                addon_utils.enable(name.strip(), default_set=True)
            index += 2
        elif arg.endswith(".blend"):
            bpy.ops.wm.open_mainfile(filepath=arg)
            index += 1
        else:
            print(f"blender_launcher: unsupported argument {arg!r}", file=sys.stderr)
            return 2
    return 0


def install(folder: Path) -> Path:
    """A `blender` command in `folder` that runs this launcher with this interpreter (its bpy)."""
    launcher = folder / "blender"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" "$@"\n')
    launcher.chmod(0o755)
    return launcher


def _run(flag: str, value: str) -> None:
    if flag == "--python-expr":
        exec(compile(value, "<python-expr>", "exec"), {"__name__": "__main__"})
    else:
        runpy.run_path(value, run_name="__main__")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
