"""Agent code that fails gets a `hint` read from the running Blender's API, naming the identifier that exists; a
call that succeeds gets none. Common mistakes, kept here and grown: each must name the right identifier on every
Blender line CI runs."""

from __future__ import annotations

import json
from typing import Any

import bpy
import pytest

from .conftest import tool_calls

pytestmark = pytest.mark.timeout(300)

NODES = "m = bpy.data.materials.new('Hinted')\nm.use_nodes = True\nnodes = m.node_tree.nodes\n"


def _eevee() -> list[str]:
    """This Blender's EEVEE engine identifiers, read from its RNA (the name moved in Blender 5)."""
    items = bpy.types.RenderSettings.bl_rna.properties["engine"].enum_items
    return [item.identifier for item in items if "EEVEE" in item.identifier]


MISTAKES: dict[str, tuple[str, Any]] = {
    "a misspelt property": ("bpy.data.objects['Cube'].locaton = (1, 2, 3)", "'location'"),
    "a misspelt method": ("bpy.data.objects['Cube'].select_sett(True)", "'select_set'"),
    "a socket by its pre-4.0 name": (
        NODES + "nodes['Principled BSDF'].inputs['Subsurface'].default_value = 0.5",
        "'Subsurface Weight'",
    ),
    "a misspelt socket": (
        NODES + "nodes['Principled BSDF'].inputs['Base Colour'].default_value[0] = 1",
        "'Base Color'",
    ),
    "a node by its interface name": (NODES + "nodes.new('Principled BSDF')", "'ShaderNodeBsdfPrincipled'"),
    "an engine this line does not have": ("bpy.context.scene.render.engine = 'EEVEE'", _eevee),
    "a modifier type misspelt": (
        "bpy.data.objects['Cube'].modifiers.new(name='s', type='SUBSURF_X')",
        "'SUBSURF'",
    ),
    "an operator without its context": ("bpy.ops.view3d.snap_cursor_to_center()", "data API"),
}


def _answers(mcp_bridge: Any, codes: list[str]) -> list[Any]:
    return tool_calls(mcp_bridge, [("execute_blender_code", {"code": code}) for code in codes])


def test_each_common_mistake_gets_a_hint_naming_what_this_blender_has_and_keeps_its_traceback(mcp_bridge: Any) -> None:
    answers = _answers(mcp_bridge, [code for code, _ in MISTAKES.values()])
    for (mistake, (_, expected)), answer in zip(MISTAKES.items(), answers, strict=True):
        assert answer.is_error, mistake
        told = json.loads(answer.text)
        assert "hint" in told, f"{mistake}: {told['error'][-300:]}"
        wanted = [f"'{name}'" for name in expected()] if callable(expected) else [expected]
        assert any(name in told["hint"] for name in wanted), f"{mistake}: {told['hint']}"
        assert len(told["hint"]) <= 400
        assert "Traceback" in told["error"] or "Error" in told["error"], mistake


def test_a_call_that_succeeds_or_fails_in_a_way_no_hint_knows_gets_none(mcp_bridge: Any) -> None:
    ok, unknown = _answers(
        mcp_bridge, ["result = {'n': len(bpy.data.objects)}", "raise ValueError('the agent said so')"]
    )
    assert not ok.is_error and "hint" not in ok.text
    assert unknown.is_error and "hint" not in json.loads(unknown.text)
