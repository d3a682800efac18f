"""Instants: parsing and printing every timeline file name, both layouts."""

from __future__ import annotations

import pytest

from conftest import all_fixture_names, requires_fixtures
from helpers import instant_file_names, timeline_dirs
from timeline.errors import InvalidInstantError
from timeline.instant import Action, Instant, State, TimelineLayout


@requires_fixtures
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
