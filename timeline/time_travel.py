"""Which instants a time-travel read can be as of, and the check every as-of goes through.

A reader as of ``T`` uses, per file group, the newest slice based at or before ``T``.  That
slice is gone once a clean deleted it, and before the first commit there is nothing to read:
either way the read would answer "no rows" (or too few) for a time it cannot see.  As Hudi
does (``TimelineUtils.validateTimestampAsOf``), such an as-of is refused:

* the latest completed clean's *earliest commit to retain* (ECTR) is the oldest instant whose
  readers the clean kept every file for (KEEP_LATEST_COMMITS, KEEP_LATEST_BY_HOURS);
* a clean without an ECTR (KEEP_LATEST_FILE_VERSIONS) keeps file versions, not a time window.
  Hudi then only checks the first completed instant; here the bound is the clean's last
  completed commit (``lastCompletedCommitTimestamp``): the slices readers from then on use were
  the newest ones of their file groups when the clean planned, and a clean never deletes those;
* the first completed commit on the active timeline: nothing was committed before it (or what
  was is archived, and its instants are no longer known).

A pending clean counts too (its plan's ECTR, or last completed commit): it may have deleted
files already, and a clean killed after its deletes stays pending until the next clean runs.
Hudi looks at completed cleans only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from timeline.active import Timeline
from timeline.errors import TimeTravelError
from timeline.instant import Action
from timeline.instant_time import parse_as_of
from timeline.payloads import CleanerPlan, CleanMetadata
from timeline.storage import Storage


@dataclass(frozen=True)
class EarliestReadable:
    """The oldest instant a time-travel read can be as of (None: no completed commit) and why."""

    instant: str | None
    reason: str


def earliest_readable(timeline: Timeline, latest_clean: CleanMetadata | None, clean_instant: str = "",
                      pending_cleans: Sequence[tuple[str, CleanerPlan]] = ()) -> EarliestReadable:
    """The decision, from the timeline, the metadata of its latest completed clean (made at
    ``clean_instant``) and the plans of its pending cleans (instant, plan)."""
    writes = timeline.completed_writes()
    if not writes:
        return EarliestReadable(None, "the table has no completed commit")
    bound = EarliestReadable(writes[0].timestamp, "the first completed commit on the active timeline")
    kept = []
    if latest_clean is not None:
        kept.append(_kept_by(f"clean {clean_instant or latest_clean.start_clean_time}",
                             latest_clean.earliest_commit_to_retain, latest_clean.last_completed_commit_timestamp,
                             latest_clean.policy))
    for instant, plan in pending_cleans:
        ectr = plan.earliest_instant_to_retain.timestamp if plan.earliest_instant_to_retain else ""
        kept.append(_kept_by(f"pending clean {instant}", ectr, plan.last_completed_commit_timestamp, plan.policy))
    for k in kept:
        if k is not None and k.instant > bound.instant:   # type: ignore[operator]
            bound = k
    return bound


def _kept_by(name: str, ectr: str, last_commit: str, policy: str) -> EarliestReadable | None:
    """What one clean keeps readable: from its ECTR on, or (no ECTR: file versions) from the last
    commit it saw on; None when it records neither."""
    if ectr:
        return EarliestReadable(ectr, f"{name} deletes the slices older readers need; {ectr} is its earliest "
                                      "commit to retain")
    if last_commit:
        return EarliestReadable(last_commit, f"{name} ({policy or 'KEEP_LATEST_FILE_VERSIONS'}) keeps file versions, "
                                             "not a time window: only readers from the last commit it saw on are "
                                             "sure to find their files")
    return None


def latest_clean(storage: Storage, timeline: Timeline) -> tuple[str, CleanMetadata | None]:
    """(instant, metadata) of the latest completed clean; ("", None) when there is none.  A clean
    file that cannot be decoded raises ``PayloadError`` naming it."""
    done = timeline.latest_completed(Action.CLEAN)
    if done is None:
        return "", None
    return done.timestamp, timeline.payload(storage, done)


def pending_clean_plans(storage: Storage, timeline: Timeline) -> list[tuple[str, CleanerPlan]]:
    """(instant, plan) of every pending clean (plans that do not decode raise ``PayloadError``)."""
    return [(i.timestamp, timeline.plan_of(storage, i)) for i in timeline.pending(Action.CLEAN)]


def check_as_of(storage: Storage, timeline: Timeline, as_of: str, shown: str | None = None) -> None:
    """``TimeTravelError`` unless the table can be read as of instant ``as_of`` (``shown``: how
    the caller names it, e.g. ``--as-of 2025-03-02 (20250302000000000)``)."""
    shown = shown or f"as-of {as_of}"
    clean_at, clean = latest_clean(storage, timeline)
    earliest = earliest_readable(timeline, clean, clean_at, pending_clean_plans(storage, timeline))
    if earliest.instant is None:
        raise TimeTravelError(f"{shown}: the table has no completed commit, so there is nothing to read as of "
                              "any time")
    if as_of < earliest.instant:
        raise TimeTravelError(f"{shown} is older than {earliest.instant}, the earliest instant the table can "
                              f"still be read as of ({earliest.reason})")


def resolve_as_of(storage: Storage, timeline: Timeline, text: str, what: str = "as-of") -> str:
    """The instant ``text`` (any form ``parse_as_of`` takes) stands for, checked against what the
    table can show (``check_as_of``): the one entry point of every time-travel read."""
    as_of = parse_as_of(text, what)
    shown = f"{what} {text}" if as_of == text else f"{what} {text} ({as_of})"
    check_as_of(storage, timeline, as_of, shown)
    return as_of


__all__ = ["EarliestReadable", "TimeTravelError", "check_as_of", "earliest_readable", "latest_clean",
           "pending_clean_plans", "resolve_as_of"]
