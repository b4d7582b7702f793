"""`lookup_blender_api` answers what the running Blender really has: each answer is compared with its RNA read
directly here, on every Blender line CI runs."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import bpy
import pytest

from hermes_blender.blender_host import ADDON_MODULE

pytestmark = pytest.mark.timeout(120)


def _lookup(query: str) -> dict[str, Any]:
    module = importlib.import_module(f"{ADDON_MODULE}.tools.api_lookup")
    return module.lookup({"query": query}, None)


def test_an_enum_answers_exactly_the_items_this_blender_has(factory_scene: None) -> None:
    told = _lookup("scene.render.engine")
    direct = [item.identifier for item in bpy.types.RenderSettings.bl_rna.properties["engine"].enum_items]
    assert [item["identifier"] for item in told["items"]] == direct
    assert told["value"] == bpy.context.scene.render.engine and told["blender_version"] == bpy.app.version_string


def test_a_struct_answers_its_properties_and_functions_from_rna(factory_scene: None) -> None:
    told = _lookup("bpy.types.Material")
    rna = bpy.types.Material.bl_rna
    assert told["kind"] == "struct" and told["base"] == "ID"
    assert {p["identifier"] for p in told["properties"]} == {p.identifier for p in rna.properties} - {"rna_type"}
    assert {f["identifier"] for f in told["functions"]} == {f.identifier for f in rna.functions}


def test_a_property_answers_its_type_default_and_range(factory_scene: None) -> None:
    told = _lookup("Object.location")
    prop = bpy.types.Object.bl_rna.properties["location"]
    assert (told["type"], told["length"], told["default"]) == ("FLOAT", 3, list(prop.default_array))


def test_an_operator_answers_its_parameters_and_whether_it_can_run_here(factory_scene: None) -> None:
    told = _lookup("bpy.ops.mesh.primitive_cube_add")
    rna = bpy.ops.mesh.primitive_cube_add.get_rna_type()
    assert [p["identifier"] for p in told["parameters"]] == [
        p.identifier for p in rna.properties if p.identifier != "rna_type"
    ]
    assert told["runs_here"] is True
    assert _lookup("bpy.ops.view3d.snap_cursor_to_center")["runs_here"] is bpy.ops.view3d.snap_cursor_to_center.poll()


def test_a_query_that_matches_nothing_answers_the_nearest_names(factory_scene: None) -> None:
    told = _lookup("Objct.locaton")
    assert told["kind"] == "no_match" and told["did_you_mean"][0] == "Object.location"
    assert "ShaderNodeBsdfPrincipled" in _lookup("principled")["did_you_mean"]


@pytest.mark.parametrize("query", ["", "   ", "x" * 201, "Object\x00.location", "scene\n.render"])
def test_an_empty_huge_or_control_character_query_is_refused_by_name(addon: ModuleType, query: str) -> None:
    errors = importlib.import_module(f"{ADDON_MODULE}.errors")
    with pytest.raises(errors.ToolError) as refused:
        _lookup(query)
    assert refused.value.state == "invalid_arguments"
