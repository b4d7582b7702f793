"""Real programs driven from outside: the published Hermes in a venv of its own (`hermes`, with `hermes_driver` and
`managed_uv` run inside that venv) and a `blender` command line over bpy (`blender_launcher`).

They live in scripts/, not tests/, because the benchmark (scripts/benchmark/hermes.py) and the tests (tests/hermes/,
tests/e2e/) both drive them, and nothing in scripts/ imports the test suite (tests/net/test_import_graph.py)."""
