"""A reused Python worker's heap is frozen by tablesvc's task functions (spark/worker_heap.py), so
that PySpark's full collection after every task walks only what tasks create."""

from __future__ import annotations

import gc
import weakref

import pytest

from tablesvc.spark import worker_heap


class _Node:
    """A weak-referenceable object to build a reference cycle from."""


@pytest.fixture
def unfreeze_after():
    yield
    gc.unfreeze()        # give the test process its collector back


def test_outside_a_spark_task_nothing_is_collected_or_frozen():
    before = gc.get_freeze_count()
    assert worker_heap.freeze_worker_heap() is False
    assert gc.get_freeze_count() == before


@pytest.fixture
def in_a_task(monkeypatch):
    """Calls of ``freeze_worker_heap`` as if inside Spark task ``task["id"]``, from a fresh count."""
    task = {"id": 7}
    monkeypatch.setattr(worker_heap, "task_attempt_id", lambda: task["id"])
    monkeypatch.setattr(worker_heap, "_last_task_attempt", None)
    monkeypatch.setattr(worker_heap, "_freezes", 0)
    return task


def test_in_a_task_it_collects_then_freezes_once_per_task(monkeypatch, in_a_task, unfreeze_after):
    real_threshold = worker_heap.REFREEZE_OBJECTS
    monkeypatch.setattr(worker_heap, "REFREEZE_OBJECTS", 1)
    cycle = _Node()
    cycle.self = cycle
    dead = weakref.ref(cycle)
    del cycle                                  # garbage, reachable only through its own cycle
    kept = [object()]

    assert worker_heap.freeze_worker_heap() is True
    assert dead() is None, "the garbage cycle must be collected before the freeze, not frozen"
    frozen = gc.get_freeze_count()
    assert frozen > 0
    assert not any(o is kept for o in gc.get_objects()), "a live object should be frozen, not walked"
    # the same task again: nothing more (the count can only drop, as frozen objects die: other
    # threads of the test process free some now and then)
    assert worker_heap.freeze_worker_heap() is False
    assert gc.get_freeze_count() <= frozen
    # the next task, with the real threshold: far fewer objects are unfrozen now, so nothing
    in_a_task["id"] = 8
    monkeypatch.setattr(worker_heap, "REFREEZE_OBJECTS", real_threshold)
    assert len(gc.get_objects()) < real_threshold
    assert worker_heap.freeze_worker_heap() is False
    assert gc.get_freeze_count() <= frozen


def test_a_process_freezes_at_most_max_freezes_times(monkeypatch, in_a_task, unfreeze_after):
    monkeypatch.setattr(worker_heap, "REFREEZE_OBJECTS", 1)
    monkeypatch.setattr(worker_heap, "MAX_FREEZES", 2)
    froze = []
    for attempt in (1, 2, 3, 4):
        in_a_task["id"] = attempt
        _ = [_Node() for _ in range(10)]       # new tracked objects, above the threshold of 1
        froze.append(worker_heap.freeze_worker_heap())
    assert froze == [True, True, False, False]


@pytest.mark.spark
def test_a_tablesvc_task_leaves_its_worker_heap_frozen(spark):
    """A task that starts the way every tablesvc task does (``task_items``) finds its worker's
    heap frozen: a fresh worker holds tens of thousands of tracked objects, all of which a
    collection would otherwise walk."""
    import pyarrow as pa

    from tablesvc.spark.read_job import pack_tasks, task_items

    def probe(batches):
        import gc

        from tablesvc.spark import worker_heap as heap

        items = list(task_items(batches, groups))
        yield pa.RecordBatch.from_pylist([{"items": len(items), "frozen": gc.get_freeze_count(),
                                           "tracked": len(gc.get_objects()), "freezes": heap._freezes}])

    tasks = pack_tasks(spark, list(range(6)))
    groups = tasks.groups          # the function captures the items, not the DataFrame
    rows = tasks.frame.mapInArrow(probe, "items long, frozen long, tracked long, freezes long").collect()
    assert sum(r["items"] for r in rows) == 6
    for r in rows:
        assert r["frozen"] > worker_heap.REFREEZE_OBJECTS, r
        # below the threshold, unless the worker has used all its freezes (then it stays as is)
        assert r["tracked"] < worker_heap.REFREEZE_OBJECTS or r["freezes"] == worker_heap.MAX_FREEZES, r


def test_the_write_task_functions_freeze_before_anything_else(monkeypatch):
    """The write's three task functions (tag pass, routing UDF, group writer) call the hook
    first; run here in process, with the hook recording its calls."""
    import pyarrow as pa

    from tablesvc.spark import write_job
    from tablesvc.write.keys import KeySpec

    calls = []
    monkeypatch.setattr(write_job, "freeze_worker_heap", lambda: calls.append("freeze") or False)
    spec = KeySpec(("id",), ("city",), True)
    batch = pa.record_batch({"id": ["a", "b"], "city": ["x", "y"]})

    tagged = list(write_job._tag_batches(spec, None)(iter([batch])))
    assert calls == ["freeze"] and tagged[0].num_rows == 2
    routed = write_job._route_rows(spec, None)(batch.to_struct_array())
    assert calls == ["freeze"] * 2 and len(routed) == 2
    write_group = write_job._write_groups(None, {}, None, None, ("id", "city"), spec)
    with pytest.raises(KeyError):
        list(write_group(iter([pa.record_batch({"id": ["a"]})])))     # no routing columns: fails after the hook
    assert calls == ["freeze"] * 3
