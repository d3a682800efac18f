"""What the scenarios of the Java tier write and expect of tablesvc's services, defined once."""

from __future__ import annotations

from tablesvc.services.result import Status

PARTITIONS = ("p0", "p1")


def rows(keys, ts: int, val: str) -> list[tuple]:
    """``(id, ts, part, val)``: key ``k`` gets event time ``ts + k`` and a fixed partition."""
    return [(f"k{k:03d}", ts + k, PARTITIONS[k % 2], f"{val}{k}") for k in keys]


def assert_ran(results, action: str):
    """The one result of ``action`` that completed (``Status.DONE``)."""
    done = [r for r in results if r.action == action and r.status is Status.DONE]
    assert len(done) == 1, f"tablesvc {action} did not run once: " + "; ".join(r.render() for r in results)
    return done[0]
