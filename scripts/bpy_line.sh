#!/usr/bin/env bash
# Run the tests against one Blender line (a bpy release) in a venv of its own, beside the main one.
#
#   bash scripts/bpy_line.sh PYTHON BPY_VERSION [PYTEST_ARGS...]
#   bash scripts/bpy_line.sh 3.13 5.3.0                       # the whole suite on the newest bpy
#   bash scripts/bpy_line.sh 3.11 4.5.15 tests/blender tests/e2e
#
# The venv (.venvs/bpy-<version>) holds the locked dev dependencies, this project (editable) and that bpy;
# bpy wheels exist for one Python each (5.x: 3.13, 4.5 and 4.2: 3.11). Nothing else changes.
set -euo pipefail
cd "$(dirname "$0")/.."
python_version="$1"
bpy_version="$2"
shift 2

venv=".venvs/bpy-${bpy_version}"
if ! interpreter="$(uv python find "${python_version}" 2>/dev/null)"; then
  echo "bpy_line: Python ${python_version} is required for bpy ${bpy_version}; install it, e.g. 'pyenv install ${python_version}'" >&2
  exit 1
fi
uv venv --quiet --allow-existing --python "${interpreter}" "${venv}"
requirements="${venv}/requirements.txt"
uv export --quiet --locked --no-hashes --no-emit-project --no-default-groups --group dev --output-file "${requirements}"
uv pip install --quiet --python "${venv}/bin/python" -r "${requirements}" -e . "bpy==${bpy_version}"
echo "bpy_line: $("${venv}/bin/python" -c 'import bpy, sys; print(f"Blender {bpy.app.version_string} on Python {sys.version.split()[0]}")')"
exec "${venv}/bin/python" -m pytest "$@"
