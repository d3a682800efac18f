"""Instants: parsing and printing every timeline file name, both layouts."""

from __future__ import annotations

import pytest

from fixture_tables import all_fixture_names
from helpers import instant_file_names, timeline_dirs
from timeline.errors import InvalidInstantError
from timeline.instant import Action, Instant, State, TimelineLayout


@pytest.mark.parametrize("name", all_fixture_names())
def test_parse_every_fixture_timeline_file_round_trips(fixture_root, name):
    table = fixture_root.path(name)
    seen = 0
    for folder, layout in timeline_dirs(table):
        for file_name in instant_file_names(folder):
            instant = Instant.parse(file_name, layout)
            assert instant.file_name() == file_name
            seen += 1
    if name not in ("v6_empty",):
        assert seen > 0


@pytest.mark.parametrize("file_name,action,state,completion", [
    ("20250331030642808.deltacommit", Action.DELTA_COMMIT, State.COMPLETED, None),
    ("20250331030642808.deltacommit.inflight", Action.DELTA_COMMIT, State.INFLIGHT, None),
    ("20250331030642808.deltacommit.requested", Action.DELTA_COMMIT, State.REQUESTED, None),
    ("20250331030642808.inflight", Action.COMMIT, State.INFLIGHT, None),
    ("20250331030642808.commit.requested", Action.COMMIT, State.REQUESTED, None),
    ("20251220210129235_20251220210129883.commit", Action.COMMIT, State.COMPLETED, "20251220210129883"),
    ("20251220210129235.compaction.requested", Action.COMPACTION, State.REQUESTED, None),
    ("20251220210129235.logcompaction.inflight", Action.LOG_COMPACTION, State.INFLIGHT, None),
    ("20260307135840454.clustering.requested", Action.CLUSTERING, State.REQUESTED, None),
    ("20250126040936578.rollback", Action.ROLLBACK, State.COMPLETED, None),
    ("20250126040936578.savepoint.inflight", Action.SAVEPOINT, State.INFLIGHT, None),
    ("20250126040936578.restore.requested", Action.RESTORE, State.REQUESTED, None),
    ("20250126040936578.indexing.requested", Action.INDEXING, State.REQUESTED, None),
    ("20250126040936578_20250126040937000.replacecommit", Action.REPLACE_COMMIT, State.COMPLETED, "20250126040937000"),
    ("20250126040936578.clean.requested", Action.CLEAN, State.REQUESTED, None),
    ("00000000000000000_20251220210108358.deltacommit", Action.DELTA_COMMIT, State.COMPLETED, "20251220210108358"),
])
def test_parse_known_names_gives_exact_values(file_name, action, state, completion):
    instant = Instant.parse(file_name)
    assert (instant.action, instant.state, instant.completion_time) == (action, state, completion)
    assert instant.file_name() == file_name


@pytest.mark.parametrize("bad", [
    "20250331030642808.frobnicate",          # unknown action
    "2025033103064.deltacommit",             # 13 digits
    "20250331030642808",                     # no action
    "20250331030642808.compaction",          # compaction never completes as itself
    "20250331030642808.commit.inflight",     # inflight commit is '<T>.inflight'
    "20250331030642808_20250331030643000.deltacommit.inflight",  # completion time on a pending file
    "20250331030642808.deltacommit.done",
    "20250331030642808.savepoint.requested",
    "abc.commit",
])
def test_parse_malformed_names_raise_typed_error_naming_file(bad):
    with pytest.raises(InvalidInstantError) as e:
        Instant.parse(bad)
    assert bad in str(e.value) or bad.split(".")[0] in str(e.value)


def test_layout_rules_are_enforced():
    with pytest.raises(InvalidInstantError, match="lacks the completion time"):
        Instant.parse("20250331030642808.deltacommit", TimelineLayout.V2)
    with pytest.raises(InvalidInstantError, match="layout 1"):
        Instant.parse("20250331030642808_20250331030643000.deltacommit", TimelineLayout.V1)


def test_completed_action_and_with_state():
    req = Instant("20250331030642808", Action.COMPACTION, State.REQUESTED)
    done = req.with_state(State.COMPLETED, "20250331030643000")
    assert done.action is Action.COMMIT and done.file_name() == "20250331030642808_20250331030643000.commit"
    assert Action.LOG_COMPACTION.completed_action is Action.DELTA_COMMIT
    assert Action.CLUSTERING.completed_action is Action.REPLACE_COMMIT


def _outcome(parse, name, layout):
    try:
        return parse(name, layout)
    except InvalidInstantError as e:
        return ("error", str(e))


def test_the_fast_parse_agrees_with_the_rule_by_rule_parser_on_every_shape():
    """Instant.parse answers well-formed names from one pattern match (issue #6: a long timeline
    is tens of thousands of names); every name, well-formed or not, must get what the reference
    parser (``_parse_checked``, every rule one by one) gives: the same instant or the same error."""
    t, c = "20250101000000123", "20250101000000456"
    heads = [t, f"{t}_{c}", t[:14], f"{t[:14]}_{c[:14]}", f"{t}_", t[:-1], f"x{t}", f"{t}_{c}_{c}", f"{t}_{c[:13]}"]
    actions = [a.value for a in Action] + ["inflight", "requested", "bogus", "Commit", ""]
    tails = ["", ".requested", ".inflight", ".completed", ".requested.x", "."]
    checked = 0
    for head in heads:
        for action in actions:
            for tail in tails:
                name = f"{head}.{action}{tail}"
                for layout in (None, TimelineLayout.V1, TimelineLayout.V2):
                    want = _outcome(Instant._parse_checked, name, layout)
                    assert _outcome(Instant.parse, name, layout) == want, (name, layout)
                    if isinstance(want, Instant):
                        assert want.file_name() == name and want == Instant(
                            want.timestamp, want.action, want.state, want.completion_time)
                        checked += 1
    assert checked > 100


def test_parsed_instants_are_shared_and_errors_are_raised_every_time():
    name = "20251220210129235_20251220210129883.commit"
    assert Instant.parse(name, TimelineLayout.V2) is Instant.parse(name, TimelineLayout.V2)
    for _ in range(2):
        with pytest.raises(InvalidInstantError, match="lacks the completion time"):
            Instant.parse("20251220210129235.commit", TimelineLayout.V2)
