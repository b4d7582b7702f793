"""Every tool whose answer grows with the file keeps its default answer within a model's budget, and says when it cut."""

from __future__ import annotations

import importlib
import json
from types import ModuleType

import bpy
import pytest

from hermes_blender.blender_host import ADDON_MODULE

MODEL_BUDGET = 25_000
"""Characters of text a default answer stays under (Claude Code's cap is 25,000 tokens; this is far below it)."""


def _tools(name: str) -> ModuleType:
    return importlib.import_module(f"{ADDON_MODULE}.tools.{name}")


def _size(answer: dict) -> int:
    return len(json.dumps(answer, ensure_ascii=False))


def test_missing_files_by_the_thousand_fit_the_budget_and_a_limit_gets_them_all(factory_scene: None) -> None:
    for i in range(1500):
        image = bpy.data.images.new(f"scan_{i:05d}", 1, 1)
        image.source = "FILE"
        image.filepath = f"/nowhere/{'deep/' * 30}scan_{i:05d}.exr"
    default = _tools("blendfile").missing_files({}, None)
    assert _size(default) < MODEL_BUDGET and default["cut_at_budget"] is True
    assert default["missing_count"] == 1500 and 0 < len(default["missing_files"]) < 1500
    asked = _tools("blendfile").missing_files({"limit": 5000}, None)
    assert len(asked["missing_files"]) == 1500 and "cut_at_budget" not in asked


def test_an_object_with_thousands_of_children_and_slots_fits_the_budget(factory_scene: None) -> None:
    parent = bpy.data.objects["Cube"]
    for i in range(3000):
        child = bpy.data.objects.new(f"bolt_{i:05d}_{'x' * 50}", None)
        child.parent = parent
        bpy.context.scene.collection.objects.link(child)
    for i in range(2000):
        parent.data.materials.append(bpy.data.materials.new(f"paint_{i:05d}_{'y' * 50}"))
    default = _tools("scene").object_detail({"name": "Cube"}, None)
    assert _size(default) < MODEL_BUDGET and default["cut_at_budget"] is True
    assert default["children_total"] == 3000 and len(default["materials"]) < 2001
    asked = _tools("scene").object_detail({"name": "Cube", "limit": 5000}, None)
    assert len(asked["children"]) == 3000 and len(asked["materials"]) == 2001 and "cut_at_budget" not in asked


@pytest.mark.parametrize("tool", ["missing_files", "object_detail", "datablocks"])
def test_an_ordinary_file_is_answered_whole(factory_scene: None, tool: str) -> None:
    module = _tools("scene" if tool == "object_detail" else "blendfile")
    answer = getattr(module, tool)({"name": "Cube"} if tool == "object_detail" else {}, None)
    assert "cut_at_budget" not in answer
