"""The change summaries' algebra, without Blender: merged over spans, taken back, told in one line."""

from __future__ import annotations

from typing import Any

import pytest

from blender_addon.summaries import Summary, frame_only, inverse, merge, nothing, said

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


def test_a_rename_told_by_two_spans_is_listed_once() -> None:
    there = {"from": "Box", "to": "Cube"}
    merged = merge([_span(0, 1, renamed=[there]), _span(1, 2, renamed=[dict(there)])])
    assert merged["renamed"] == [there] and merged["said"] == "renamed Box to Cube"


def test_datablocks_made_and_removed_again_sum_to_no_change() -> None:
    merged = merge(
        [_span(0, 1, added=["Tmp"], datablocks={"meshes": 1}), _span(1, 2, removed=["Tmp"], datablocks={"meshes": -1})]
    )
    assert "datablocks" not in merged and merged["changed"] is False and merged["said"] == "nothing changed"


def test_a_merge_too_long_for_the_answer_is_cut_at_the_budget_and_keeps_its_whole_counts() -> None:
    names = [f"Rock_{i:05}" for i in range(3000)]  # about 39,000 characters: past the 20,000 of the budget
    merged = merge([_span(0, 1, added=names, counts={"added": 9000}), _span(1, 2, transformed=["Cube"])])
    assert merged["cut_at_budget"] is True and 0 < len(merged["added"]) < 3000
    assert (
        merged["counts"]["added"] == 9000 and "added Rock_00000, Rock_00001, Rock_00002 and 8997 more" in merged["said"]
    )
    whole = merge([_span(0, 1, added=["A"]), _span(1, 2, transformed=["Cube"])])
    assert "counts" not in whole and "cut_at_budget" not in whole


def test_said_tells_each_move_from_where_to_where_and_datablocks_by_their_sign() -> None:
    told = said(
        {
            "renamed": [{"from": "A", "to": "B"}],
            "counts": {"renamed": 4},
            "datablocks": {"lights": -1, "meshes": 2},
            "active_object": {"from": "Cube", "to": "Leg"},
            "frame_changed": {"from": 1, "to": 9},
            "scene_changed": {"render.engine": {"from": "EEVEE", "to": "CYCLES"}},
            "file": [{"event": "saved", "path": "/tmp/a.blend"}, {"event": "opened"}],
            "unreadable": "a datablock that cannot be read",
        }
    )
    assert told == (
        "renamed A to B and 3 more; datablocks lights -1, meshes +2; active object Cube -> Leg; frame 1 -> 9; "
        "scene render.engine EEVEE -> CYCLES; file saved (/tmp/a.blend); file opened; "
        "changed the scene in ways the bridge could not read (a datablock that cannot be read)"
    )


def test_a_material_given_to_more_objects_than_listed_counts_them_all() -> None:
    given = [{"object": o, "material": "Wood"} for o in ("Chair", "Back")]
    assert (
        said({"materials_given": given, "counts": {"materials_given": 10}})
        == "gave Chair, Back and 8 more material Wood"
    )


def test_file_events_of_every_span_are_told_in_order() -> None:
    saved, opened = {"event": "saved", "path": "/tmp/a.blend"}, {"event": "opened", "path": "/tmp/b.blend"}
    assert merge([_span(0, 1, file=[saved]), _span(1, 2, file=[opened])])["file"] == [saved, opened]


def test_what_could_not_be_read_is_kept_by_a_merge_and_by_an_inverse() -> None:
    unread = _span(0, 1, unreadable="a datablock that cannot be read")
    assert merge([unread, _span(1, 2, transformed=["Cube"])])["unreadable"] == "a datablock that cannot be read"
    assert "could not read" in inverse(unread)["said"]


def test_the_selection_an_undo_names_is_whole_and_drops_the_cut_count_of_the_one_before() -> None:
    merged = merge([_span(0, 1, selection=["A", "B"], counts={"selection": 9})], selection=["C"])
    assert merged["selection"] == ["C"] and "counts" not in merged and merged["said"] == "selection now C"


def test_the_inverse_of_a_cut_summary_is_cut_too_with_its_counts_swapped() -> None:
    undone = inverse(_span(0, 1, added=["A"], counts={"added": 4000}, cut_at_budget=True))
    assert undone["counts"] == {"removed": 4000} and undone["cut_at_budget"] is True


def test_only_a_summary_of_nothing_but_a_frame_move_is_frame_only() -> None:
    assert frame_only(_span(0, 1, frame_changed={"from": 1, "to": 2}))
    assert not frame_only(_span(0, 1, frame_changed={"from": 1, "to": 2}, transformed=["Cube"]))
    assert not frame_only(_span(0, 1, transformed=["Cube"]))
