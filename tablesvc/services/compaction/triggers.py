"""When is a compaction due?  Hudi's trigger strategies (``hoodie.compact.inline.trigger.strategy``).

* ``NUM_COMMITS`` (default): completed delta commits since the last completed compaction
  >= ``hoodie.compact.inline.max.delta.commits`` (default 5).
* ``NUM_COMMITS_AFTER_LAST_REQUEST``: the same count, from the last *requested* compaction.
* ``TIME_ELAPSED``: seconds since the last completed compaction (or, without one, since the
  first delta commit) >= ``hoodie.compact.inline.max.delta.seconds`` (default 3600).
* ``NUM_AND_TIME`` / ``NUM_OR_TIME``: both / either.

Log compactions complete as delta commits too; they are not counted.  Time is read off
the injected clock; instant times are parsed in the table's timezone.
"""

from __future__ import annotations

from datetime import timezone, tzinfo
from typing import Any

from tablesvc.config.registry import COMPACTION_TRIGGER_STRATEGIES as STRATEGIES
from tablesvc.config.values import service_config
from timeline.active import Timeline
from timeline.clock import Clock
from timeline.instant import Action, Instant, State
from timeline.instant_time import parse_instant

# The keys, their defaults and their checks are the registry's (tablesvc/config/registry.py).
STRATEGY_KEY = "hoodie.compact.inline.trigger.strategy"
MAX_COMMITS_KEY = "hoodie.compact.inline.max.delta.commits"
MAX_SECONDS_KEY = "hoodie.compact.inline.max.delta.seconds"


# The three questions below walk the timeline from its newest end and stop at the answer: the last
# compaction is usually recent, so the decision costs what it looks at, not the timeline's length.
def last_completed_compaction(timeline: Timeline) -> Instant | None:
    return next((i for i in timeline.newest_first() if i.state is State.COMPLETED and i.action is Action.COMMIT
                 and timeline.origin_action(i) is Action.COMPACTION), None)


def last_requested_compaction(timeline: Timeline) -> Instant | None:
    """The latest compaction in any state (requested, inflight or completed)."""
    return next((i for i in timeline.newest_first() if i.action is Action.COMPACTION
                 or (i.state is State.COMPLETED and timeline.origin_action(i) is Action.COMPACTION)), None)


def delta_commits_since(timeline: Timeline, after: str | None) -> list[Instant]:
    """Completed delta commits (log compactions excluded) requested after ``after``, oldest first."""
    found = [i for i in timeline.newest_first(after) if i.state is State.COMPLETED
             and i.action is Action.DELTA_COMMIT and timeline.origin_action(i) is not Action.LOG_COMPACTION]
    found.reverse()
    return found


def compaction_due(timeline: Timeline, config: Any, clock: Clock, *,
                   tz: tzinfo = timezone.utc) -> tuple[bool, str]:
    """(due, reason): the reason always says what was counted against which threshold."""
    config = service_config(config)   # a plain mapping is checked by the registry too
    strategy = config.get(STRATEGY_KEY)
    max_commits = config.get(MAX_COMMITS_KEY)
    max_seconds = config.get(MAX_SECONDS_KEY)
    anchor = last_requested_compaction(timeline) if strategy == "NUM_COMMITS_AFTER_LAST_REQUEST" \
        else last_completed_compaction(timeline)
    since = "the last compaction request" if strategy == "NUM_COMMITS_AFTER_LAST_REQUEST" else \
        "the last compaction"
    if anchor is None:
        since = "the table was created (no compaction yet)"
    deltas = delta_commits_since(timeline, anchor.timestamp if anchor else None)
    count = len(deltas)
    num_ok = count >= max_commits
    num_text = (f"{count} delta commit{'s' if count != 1 else ''} since {since} "
                f"{'>=' if num_ok else '<'} {max_commits}")

    start = anchor.timestamp if anchor else (deltas[0].timestamp if deltas else None)
    if start is None:
        elapsed = None
        time_ok = False
        time_text = "no delta commit yet, so no time has elapsed"
    else:
        elapsed = max(0, (clock.now_ms() - parse_instant(start, tz)) // 1000)
        time_ok = elapsed >= max_seconds
        what = "the last compaction" if anchor else "the first delta commit"
        time_text = f"{elapsed}s since {what} ({start}) {'>=' if time_ok else '<'} {max_seconds}s"
    if count == 0:  # nothing to compact, whatever the clock says
        time_ok = False

    if strategy in ("NUM_COMMITS", "NUM_COMMITS_AFTER_LAST_REQUEST"):
        due, text = num_ok, num_text
    elif strategy == "TIME_ELAPSED":
        due, text = time_ok, time_text
    elif strategy == "NUM_AND_TIME":
        due, text = num_ok and time_ok, f"{num_text} and {time_text}"
    else:  # NUM_OR_TIME
        due, text = num_ok or time_ok, f"{num_text} or {time_text}"
    return due, f"{text} ({strategy})"


__all__ = ["STRATEGIES", "compaction_due", "delta_commits_since", "last_completed_compaction",
           "last_requested_compaction"]
