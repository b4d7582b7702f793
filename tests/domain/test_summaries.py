"""The change summaries' algebra, without Blender: merged over spans, taken back, told in one line."""

from __future__ import annotations

from typing import Any

import pytest

from blender_addon.summaries import Summary, inverse, merge, nothing, said

pytestmark = pytest.mark.timeout(30)


def _span(before: int, after: int, **told: Any) -> Summary:
    summary = Summary(revision={"before": before, "after": after}, **told, changed=True)
    summary["said"] = said(summary)
    return summary


def test_a_merged_count_counts_objects_not_the_spans_that_named_them() -> None:
    big = _span(0, 1, added=[f"Rock{i}" for i in range(10)], counts={"added": 5000}, cut_at_budget=True)
    drags = [_span(i, i + 1, transformed=["Cube"]) for i in range(1, 41)]
    merged = merge([big, *drags])
    assert merged["transformed"] == ["Cube"]
    assert "moved Cube" in merged["said"] and "moved Cube and" not in merged["said"]
    assert merged["counts"] == {"added": 5000, "transformed": 1}
    assert "added Rock0, Rock1, Rock2 and 4997 more" in merged["said"]


def test_a_count_cut_in_several_spans_adds_only_the_names_none_of_them_listed() -> None:
    first = _span(0, 1, added=["A", "B"], counts={"added": 100})
    second = _span(1, 2, added=["C"], counts={"added": 50})
    assert merge([first, second])["counts"]["added"] == 3 + 98 + 49


def test_an_object_added_then_removed_is_neither_and_one_removed_then_added_back_is_neither() -> None:
    merged = merge(
        [
            _span(0, 1, added=["Leg1", "Leg2"]),
            _span(1, 2, removed=["Leg1", "Light"]),
            _span(2, 3, added=["Light"]),
        ]
    )
    assert merged["added"] == ["Leg2"] and "removed" not in merged
    gone = merge([_span(0, 1, added=["Tmp"]), _span(1, 2, removed=["Tmp"])])
    assert "added" not in gone and "removed" not in gone
    assert gone["changed"] is False and gone["said"] == "nothing changed"


def test_one_span_that_removes_an_object_and_adds_another_of_its_name_has_added_it() -> None:
    merged = merge([_span(0, 1, added=["Leg"]), _span(1, 2, removed=["Leg"], added=["Leg"])])
    assert merged["added"] == ["Leg"] and "removed" not in merged


def test_the_active_object_made_active_again_and_a_setting_set_back_are_no_change() -> None:
    there = _span(0, 1, active_object={"from": "Cube", "to": "Leg"}, scene_changed={"camera": {"from": 1, "to": 2}})
    back = _span(1, 2, active_object={"from": "Leg", "to": "Cube"}, scene_changed={"camera": {"from": 2, "to": 1}})
    merged = merge([there, back])
    assert "active_object" not in merged and "scene_changed" not in merged


def test_the_last_selection_wins_with_its_own_count() -> None:
    merged = merge([_span(0, 1, selection=["A"]), _span(1, 2, selection=["B", "C"], counts={"selection": 9})])
    assert merged["selection"] == ["B", "C"] and merged["counts"]["selection"] == 9


def test_revisions_span_from_the_first_to_the_last() -> None:
    assert merge([_span(3, 4, added=["A"]), _span(4, 9, removed=["B"])])["revision"] == {"before": 3, "after": 9}


def test_nothing_says_nothing_changed_at_its_revision() -> None:
    assert nothing(7) == {"revision": {"before": 7, "after": 7}, "changed": False, "said": "nothing changed"}


def test_inverse_swaps_additions_and_removals_reverses_renames_and_negates_counts() -> None:
    undone = inverse(
        _span(
            0,
            1,
            added=["Sphere"],
            removed=["Light"],
            renamed=[{"from": "A", "to": "B"}, {"from": "B", "to": "C"}],
            datablocks={"meshes": 1},
            frame_changed={"from": 1, "to": 9},
        )
    )
    assert undone["removed"] == ["Sphere"] and undone["added"] == ["Light"]
    assert undone["renamed"] == [{"from": "C", "to": "B"}, {"from": "B", "to": "A"}]
    assert undone["datablocks"] == {"meshes": -1} and undone["frame_changed"] == {"from": 9, "to": 1}


def test_said_names_three_and_counts_the_rest() -> None:
    assert said({"added": ["A", "B", "C", "D"]}) == "added A, B, C and 1 more"
    assert said({"selection": []}) == "selection now empty"
    assert said({}) == "nothing changed"


def test_a_material_given_is_told_by_material_and_taken_back_by_its_inverse() -> None:
    given = _span(0, 1, materials_given=[{"object": o, "material": "Wood"} for o in ("Chair", "Back", "Leg1", "Leg2")])
    assert said(given) == "gave Chair, Back, Leg1 and 1 more material Wood"
    undone = inverse(given)
    assert "materials_given" not in undone and len(undone["materials_taken"]) == 4
    assert undone["said"] == "took material Wood from Chair, Back, Leg1 and 1 more"


def test_unused_datablocks_a_load_left_out_are_summed_and_told_as_such() -> None:
    merged = merge([_span(0, 1, orphans_dropped={"materials": 2}), _span(1, 2, orphans_dropped={"materials": 1})])
    assert merged["orphans_dropped"] == {"materials": 3}
    assert "left out unused datablocks (3 materials" in merged["said"] and "-" not in merged["said"]


def test_one_span_that_removes_an_object_and_makes_another_of_its_name_tells_both() -> None:
    merged = merge([_span(0, 1, added=["Cube"], removed=["Cube"])])
    assert merged["added"] == ["Cube"] and merged["removed"] == ["Cube"] and merged["changed"] is True
