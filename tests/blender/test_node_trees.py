"""`get_node_tree` answers a tree a model can rebuild: a tree rebuilt from its JSON by this test matches the original
(nodes, links, values), a Geometry Nodes modifier's tree and a group's interface included; reading leaves no trace."""

from __future__ import annotations

import json
from typing import Any

import bpy
import pytest

from .conftest import tool_calls

pytestmark = pytest.mark.timeout(300)


def _wood() -> None:
    material = bpy.data.materials.new("Wood")
    material.use_nodes = True
    nodes, links = material.node_tree.nodes, material.node_tree.links
    bsdf = nodes["Principled BSDF"]
    bsdf.inputs["Roughness"].default_value = 0.8
    noise = nodes.new("ShaderNodeTexNoise")
    noise.name, noise.label, noise.location = "Grain", "wood grain", (-500.0, 120.0)
    noise.inputs["Scale"].default_value = 42.0
    ramp = nodes.new("ShaderNodeMapRange")
    ramp.location = (-300.0, 0.0)
    ramp.interpolation_type = "SMOOTHSTEP"
    links.new(noise.outputs["Fac"], ramp.inputs["Value"])
    links.new(ramp.outputs["Result"], bsdf.inputs["Metallic"])


def _rebuilt(told: dict[str, Any], tree_type: str) -> Any:
    """A new tree made from the JSON alone, as a model would."""
    tree = bpy.data.node_groups.new("Rebuilt", tree_type)
    for entry in told["nodes"]:
        node = tree.nodes.new(entry["type"])
        node.name, node.location, node.label = entry["name"], entry["location"], entry.get("label", "")
        for identifier, value in entry.get("properties", {}).items():
            setattr(node, identifier, value)
        for identifier, value in entry.get("inputs", {}).items():
            next(s for s in node.inputs if s.identifier == identifier).default_value = value
    for link in told["links"]:
        source = next(s for s in tree.nodes[link["from_node"]].outputs if s.identifier == link["from_socket"])
        target = next(s for s in tree.nodes[link["to_node"]].inputs if s.identifier == link["to_socket"])
        tree.links.new(source, target)
    return tree


def _shape(tree: Any) -> dict[str, Any]:
    def value(socket: Any) -> Any:
        raw = getattr(socket, "default_value", None)
        try:
            return [round(v, 5) for v in raw]
        except TypeError:
            return round(raw, 5) if isinstance(raw, float) else raw

    return {
        "nodes": {
            n.name: (n.bl_idname, tuple(round(v, 1) for v in n.location), n.label, [value(s) for s in n.inputs])
            for n in tree.nodes
        },
        "links": sorted(
            (link.from_node.name, link.from_socket.identifier, link.to_node.name, link.to_socket.identifier)
            for link in tree.links
        ),
    }


def test_a_materials_tree_rebuilt_from_its_json_matches_the_original_and_reading_leaves_no_trace(
    mcp_bridge: Any,
) -> None:
    _wood()
    groups = len(bpy.data.node_groups)
    reading = ("get_node_tree", {"owner": "material:Wood"})
    _, history, told, after = tool_calls(
        mcp_bridge, [reading, ("get_agent_history", {}), reading, ("get_agent_history", {})]
    )
    assert not told.is_error, told.text
    answer = told.structured
    assert answer["tree_type"] == "ShaderNodeTree" and "4 nodes" in answer["summary"]
    assert len(bpy.data.node_groups) == groups and after.structured["revision"] == history.structured["revision"]
    rebuilt = _rebuilt(answer, "ShaderNodeTree")
    try:
        assert _shape(rebuilt) == _shape(bpy.data.materials["Wood"].node_tree)
    finally:
        bpy.data.node_groups.remove(rebuilt)


def test_a_geometry_nodes_modifiers_tree_is_read_with_its_interface(mcp_bridge: Any) -> None:
    group = bpy.data.node_groups.new("Bumps", "GeometryNodeTree")
    group.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket("Height", in_out="INPUT", socket_type="NodeSocketFloat")
    inputs, outputs = group.nodes.new("NodeGroupInput"), group.nodes.new("NodeGroupOutput")
    group.links.new(inputs.outputs[0], outputs.inputs[0])
    modifier = bpy.data.objects["Cube"].modifiers.new("GeometryNodes", "NODES")
    modifier.node_group = group
    [told] = tool_calls(mcp_bridge, [("get_node_tree", {"owner": "object:Cube/modifier:GeometryNodes"})])
    answer = told.structured
    assert answer["tree"] == "Bumps" and answer["tree_type"] == "GeometryNodeTree"
    assert sorted((i["in_out"], i["name"]) for i in answer["interface"]) == [
        ("INPUT", "Geometry"),
        ("INPUT", "Height"),
        ("OUTPUT", "Geometry"),
    ]


@pytest.mark.parametrize(
    "owner, state",
    [
        ("material:NoSuch", "not_found"),
        ("object:Cube/modifier:None", "not_found"),
        ("camera:Camera", "invalid_arguments"),
        ("", "invalid_arguments"),
        ("material:\x00", "invalid_arguments"),
    ],
)
def test_an_owner_that_is_not_there_or_has_no_tree_is_a_named_error(mcp_bridge: Any, owner: str, state: str) -> None:
    [told] = tool_calls(mcp_bridge, [("get_node_tree", {"owner": owner})])
    assert told.is_error and json.loads(told.text)["state"] == state
