"""`describe_node_type` answers a node type as this Blender registers it, and leaves no trace: no datablock, no
agent step, the revision unchanged. Compared with a node made directly here, on every Blender line CI runs."""

from __future__ import annotations

import json
from typing import Any

import bpy
import pytest

from .conftest import tool_calls

pytestmark = pytest.mark.timeout(300)
KINDS = {
    "a shader node": ("ShaderNodeBsdfPrincipled", "ShaderNodeTree"),
    "a geometry node": ("GeometryNodeMeshCube", "GeometryNodeTree"),
    "a compositor node": ("CompositorNodeBlur", "CompositorNodeTree"),
}


def _direct(identifier: str, tree_type: str) -> tuple[list[str], list[str]]:
    tree = bpy.data.node_groups.new("direct", tree_type)
    try:
        node = tree.nodes.new(identifier)
        return [s.identifier for s in node.inputs], [s.identifier for s in node.outputs]
    finally:
        bpy.data.node_groups.remove(tree)


def test_each_kind_of_node_is_described_as_this_blender_makes_it_and_leaves_no_trace(mcp_bridge: Any) -> None:
    groups = len(bpy.data.node_groups)
    calls = [("describe_node_type", {"node_type": identifier}) for identifier, _ in KINDS.values()]
    answers = tool_calls(mcp_bridge, [("get_agent_history", {}), *calls, ("get_agent_history", {})])
    before, described, after = answers[0], answers[1:-1], answers[-1]
    for (kind, (identifier, tree_type)), answer in zip(KINDS.items(), described, strict=True):
        assert not answer.is_error, answer.text
        told = answer.structured
        inputs, outputs = _direct(identifier, tree_type)
        assert [s["identifier"] for s in told["inputs"]] == inputs, kind
        assert [s["identifier"] for s in told["outputs"]] == outputs, kind
        assert told["tree_type"] == tree_type and told["blender_version"] == bpy.app.version_string
    assert len(bpy.data.node_groups) == groups
    assert after.structured["steps"] == [] and after.structured["revision"] == before.structured["revision"]


def test_a_node_named_as_the_interface_names_it_is_found_and_its_enum_items_are_this_blenders(mcp_bridge: Any) -> None:
    [answer] = tool_calls(mcp_bridge, [("describe_node_type", {"node_type": "Principled BSDF"})])
    told = answer.structured
    assert told["identifier"] == "ShaderNodeBsdfPrincipled"
    names = {s["name"] for s in told["inputs"]}
    assert "Base Color" in names and "Subsurface Weight" in names  # as 4.0 and later name them
    distribution = next(p for p in told["properties"] if p["identifier"] == "distribution")
    rna = bpy.types.ShaderNodeBsdfPrincipled.bl_rna.properties["distribution"]
    assert distribution["items"] == [item.identifier for item in rna.enum_items]


@pytest.mark.parametrize("node_type", ["NoSuchNode", "", "x" * 300, "Principled\x00BSDF"])
def test_a_node_type_that_is_not_there_or_not_a_name_is_a_named_error(mcp_bridge: Any, node_type: str) -> None:
    [answer] = tool_calls(mcp_bridge, [("describe_node_type", {"node_type": node_type})])
    assert answer.is_error
    assert json.loads(answer.text)["state"] in ("not_found", "invalid_arguments")
