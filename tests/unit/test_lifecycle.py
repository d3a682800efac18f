"""The one instant lifecycle (tablesvc/services/lifecycle): an action's commit requirements are
values that can be listed; a failing one refuses the commit and leaves the instant inflight;
they are checked under the table lock, on the timeline of that lock hold.

Tables: copies of tables Apache Hudi wrote (tests/data/hudi), compacted in this process."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from fixture_tables import TABLES_DIR, copy_table
from table_builders import busy_table

from tablesvc.api import Table
from tablesvc.errors import ConflictError, HiddenWriteError
from tablesvc.services.compaction import run_compaction, schedule_compaction
from tablesvc.services.compaction.requirements import NoWriteIntoPlannedSlice, PlannedSlice, commit_requirements
from tablesvc.services.lifecycle import (
    CLEAN_LIFECYCLE, COMPACTION_LIFECYCLE, LOG_COMPACTION_LIFECYCLE, ROLLBACK_LIFECYCLE, WRITE_LIFECYCLE,
    CommitRequirement, HeartbeatFrom, InstantLifecycle, LeaseHeld, Markers, OnFailure, StillInflight,
)
from tablesvc.services.log_compaction.requirements import NoLogBetweenPlannedAndCompacted
from tablesvc.services.log_compaction.requirements import commit_requirements as log_compaction_requirements
from timeline.clock import ManualClock
from timeline.heartbeat import heartbeat_path
from timeline.instant import Action, Instant, State
from timeline.lease import LeaseFence, LeaseLostError, LeaseStore
from timeline.lock import LOCK_FILE
from timeline.payloads import CommitMetadata, WriteStat, encode_commit_metadata
from timeline.storage import join
from tablesvc.logformat import delete_block, encode_blocks

V6_TABLE = "v6_trips_8i1u"                  # one file group with a log: a compaction plan of one slice


def planned(tmp_path, name: str | None = None) -> tuple[Table, str]:
    """A copy of fixture ``name`` (else a v8 table tablesvc wrote: the v8/v9 tables Hudi wrote here
    keep a metadata table or no log) with a compaction plan scheduled on it."""
    if name is None:
        table = busy_table(tmp_path, 8)[0]
    else:
        table = Table.open(str(copy_table(TABLES_DIR / name, tmp_path)))
    instant = schedule_compaction(table, force=True).instant
    assert instant
    return table, instant


def plan_of(table: Table, instant: str):
    timeline = table.timeline()
    return timeline.plan_of(table.storage, timeline.require(instant))


def held_lease(table: Table, job: str) -> tuple[LeaseStore, ManualClock, LeaseFence]:
    """A lease of ``job`` held by worker-a, on a clock the test moves."""
    clock = ManualClock(table.clock.now_ms())
    leases = LeaseStore(table.storage, table.base_path, clock)
    lease = leases.acquire(job, "worker-a", 60_000)
    return leases, clock, LeaseFence(leases, lambda: lease)


def test_a_v6_compaction_lists_its_commit_requirements_as_values(tmp_path):
    table, c = planned(tmp_path, V6_TABLE)
    plan = plan_of(table, c)
    (op,) = plan.operations
    _leases, _clock, fence = held_lease(table, f"compaction-{c}")

    requirements = commit_requirements(table, plan, c, fence)

    assert [r.name for r in requirements] == ["lease-held", "still-inflight", "no-write-into-planned-slice"]
    lease, still, v6 = requirements
    assert (lease.job, lease.token) == (f"compaction-{c}", 1)
    assert lease.describe() == f"the lease of job compaction-{c} with token 1 is still the job's newest"
    assert still == StillInflight(c, Action.COMPACTION, "compaction")
    assert v6 == NoWriteIntoPlannedSlice(c, (PlannedSlice(op.partition_path, op.file_id, op.base_instant_time,
                                                          frozenset(n.rsplit("/", 1)[-1] for n in op.delta_file_paths)),))
    assert v6.message == (f"no log file outside the plan of {c}, of a committed write or of a pending write later "
                          "than it, lies in one of its 1 planned slices (the compacted base file would hide it)")
    # values: frozen, comparable, hashable; a fence is compared by its job and token only
    with pytest.raises(dataclasses.FrozenInstanceError):
        v6.instant = "0"  # type: ignore[misc]
    assert commit_requirements(table, plan, c, fence) == requirements and len({*requirements}) == 3
    # without a lease (the CLI, the Python API) the commit needs the plan still inflight only
    assert [r.name for r in commit_requirements(table, plan, c)] == ["still-inflight", "no-write-into-planned-slice"]


def test_v8_and_later_compactions_need_no_slice_requirement(tmp_path):
    table, c = planned(tmp_path)
    assert commit_requirements(table, plan_of(table, c), c) == (StillInflight(c, Action.COMPACTION, "compaction"),)


def test_a_v6_log_compaction_names_the_slices_it_compacted():
    @dataclass(frozen=True)
    class Task:
        instant: str
        partition: str
        file_id: str
        name_instant: str
        log_files: tuple[str, ...]

    class V6:
        class config:
            version = 6

    base, lc = "20250101000000000", "20250103000000000"
    logs = (f".fg-0_{base}.log.1_0-1-1", f".fg-0_{base}.log.2_0-2-2")
    tasks = [Task(lc, "p", "fg-0", base, logs), Task(lc, "p", "fg-1", base, (f".fg-1_{base}.log.1_0-1-1",))]
    stats = {"p": [WriteStat(file_id="fg-0", path=f"p/.fg-0_{base}.log.4_0-3-3", partition_path="p", log_version=4)]}
    requirements = log_compaction_requirements(V6, lc, tasks, stats)
    assert [r.name for r in requirements] == ["still-inflight", "no-log-between-planned-and-compacted",
                                              "v6-no-write-in-progress"]
    (compacted,) = requirements[1].slices          # fg-1 has no compacted log: nothing to guard
    assert (compacted.file_id, compacted.planned_max_version, compacted.compacted_version) == ("fg-0", 2, 4)
    assert isinstance(requirements[1], NoLogBetweenPlannedAndCompacted)


def _conflicting_write(table: Table, plan) -> tuple[str, str]:
    """A delta commit, completed after the plan, that appended a log to a planned slice (as a
    writer that routed its rows before the plan existed would): (its instant, the log's path)."""
    (op,) = plan.operations
    log = f"{op.partition_path}/.{op.file_id}_{op.base_instant_time}.log.9_0-99-99"
    stat = WriteStat(file_id=op.file_id, path=log, prev_commit=op.base_instant_time,
                     partition_path=op.partition_path, log_version=9, num_writes=1)
    writer = table.timeline_writer
    requested = writer.request(Action.DELTA_COMMIT)
    block = delete_block(requested.timestamp, None, [("k-late", op.partition_path)])
    table.storage.write_new(join(table.base_path, log), encode_blocks([block]))
    inflight = writer.start(requested)
    metadata = CommitMetadata(partition_to_write_stats={op.partition_path: (stat,)}, operation_type="UPSERT")
    writer.complete(inflight, encode_commit_metadata(metadata, table.config.layout))
    return inflight.timestamp, log


def test_a_write_into_a_planned_slice_refuses_the_commit_and_leaves_the_compaction_inflight(tmp_path, monkeypatch):
    """The requirement holds when the work starts; a write lands while the tasks run; the commit
    re-checks it under the lock and refuses.  C stays inflight without a heartbeat, its files and
    markers in place for the rollback that the next run makes."""
    from tablesvc.services.compaction import executor

    table, c = planned(tmp_path, V6_TABLE)
    plan = plan_of(table, c)
    landed = {}
    real_run = executor.run_file_group_tasks

    def run_then_a_write_lands(*args, **kwargs):
        stats = real_run(*args, **kwargs)
        landed["write"], landed["log"] = _conflicting_write(table, plan)
        return stats

    monkeypatch.setattr(executor, "run_file_group_tasks", run_then_a_write_lands)
    with pytest.raises(HiddenWriteError) as refused:
        run_compaction(table, c, in_process=True)

    name = landed["log"].rsplit("/", 1)[-1]
    assert str(refused.value).startswith(f"compaction {c}: the committed write {landed['write']} put {name} into "
                                         f"file group {plan.operations[0].file_id}")
    assert table.timeline().get(c).state is State.INFLIGHT
    assert not os.path.exists(heartbeat_path(table.base_path, c))
    assert os.path.isdir(join(table.base_path, ".hoodie", ".temp", c))      # markers: the rollback's guide


@dataclass(frozen=True)
class Recorded(CommitRequirement):
    """A test requirement: records whether the table lock was held and what the timeline held
    when it was checked; refuses when ``refuse``."""

    name: ClassVar[str] = "recorded"

    label: str
    seen: list = field(compare=False)
    refuse: bool = False

    def describe(self) -> str:
        return f"{self.label} is recorded"

    def check(self, table, timeline) -> None:
        locked = os.path.exists(join(table.base_path, LOCK_FILE))
        self.seen.append((self.label, locked, timeline.max_time()))
        if self.refuse:
            raise ConflictError(f"{self.label} refuses")


def test_requirements_are_checked_in_order_under_the_lock_and_the_first_failure_refuses(tmp_path):
    table, c = planned(tmp_path, V6_TABLE)
    seen: list = []
    life = InstantLifecycle(table, COMPACTION_LIFECYCLE, heartbeat_interval_ms=60_000)
    with pytest.raises(ConflictError, match="^b refuses$"):
        with life.start(Instant(c, Action.COMPACTION, State.REQUESTED)):
            later, _log = _conflicting_write(table, plan_of(table, c))   # after the start, before the commit
            life.commit(b"", (Recorded("a", seen), Recorded("b", seen, refuse=True), Recorded("c", seen)))
    # a and b ran with the lock held, on the timeline of that lock hold (it holds the later
    # write); c never ran: the first failure refuses the commit
    assert seen == [("a", True, later), ("b", True, later)]
    assert table.timeline().get(c).state is State.INFLIGHT
    assert not os.path.exists(join(table.base_path, LOCK_FILE))


def test_a_lost_lease_refuses_the_commit(tmp_path):
    """worker-a's lease expires while it works and worker-b takes the job: the commit's first
    requirement refuses, and the instant stays inflight for worker-b to roll back and re-run."""
    table, c = planned(tmp_path, V6_TABLE)
    leases, clock, fence = held_lease(table, f"compaction-{c}")
    life = InstantLifecycle(table, COMPACTION_LIFECYCLE, heartbeat_interval_ms=60_000)
    with pytest.raises(LeaseLostError, match=f"job compaction-{c}: the lease with token 1 of worker-a was "
                                             "superseded by token 2 of worker-b"):
        with life.start(Instant(c, Action.COMPACTION, State.REQUESTED), (LeaseHeld.of(fence),)):
            clock.advance(61_000)
            assert leases.acquire(f"compaction-{c}", "worker-b", 60_000).token == 2
            life.commit(b"", commit_requirements(table, plan_of(table, c), c, fence))
    assert table.timeline().get(c).state is State.INFLIGHT


def test_each_action_has_its_rules():
    """The choices the five actions differ by (docs/architecture.md, "One instant lifecycle")."""
    rules = {r.action: r for r in (WRITE_LIFECYCLE, COMPACTION_LIFECYCLE, LOG_COMPACTION_LIFECYCLE, CLEAN_LIFECYCLE,
                                   ROLLBACK_LIFECYCLE)}
    assert len(rules) == 5
    assert rules[Action.DELTA_COMMIT].heartbeat is HeartbeatFrom.BEFORE_REQUEST
    assert rules[Action.DELTA_COMMIT].on_failure is OnFailure.ABORT
    assert [r for r in rules.values() if r.on_failure is OnFailure.ABORT] == [WRITE_LIFECYCLE]
    assert {a for a, r in rules.items() if r.markers is Markers.NONE} == {Action.CLEAN, Action.ROLLBACK}
    assert rules[Action.CLEAN].heartbeat is HeartbeatFrom.NONE
