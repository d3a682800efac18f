"""The Java tier's own checks, without Java (these run in ``make test``): the model's event-time rule,
and that a reader differing from the model fails naming the step, the table version, the reader and
the first differing key.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from event_time_model import AmbiguousStep, EventTimeModel
from java_hudi import HudiBundle, JavaHudiSetup, JavaHudiUnavailable, JavaTable
from reader_agreement import ThreeReaders, first_difference


def test_an_older_event_loses_and_a_newer_delete_removes():
    model = EventTimeModel()
    model.apply("insert", [("a", 10, "p0", "x"), ("b", 10, "p1", "y")])
    model.apply("upsert", [("a", 5, "p0", "older"), ("b", 20, "p1", "newer")])
    model.apply("delete", [("a", 30, "p0", None)])
    assert model.rows() == [("b", 20, "p1", "newer")]
    model.apply("delete", [("b", 15, "p1", None)])      # older than the stored row: it stays
    assert model.rows() == [("b", 20, "p1", "newer")]


@pytest.mark.parametrize("operation, row", [
    ("insert", ("a", 20, "p0", "again")),     # Hudi's insert keeps both
    ("upsert", ("a", 10, "p0", "tie")),       # equal ordering values: the merge order decides
    ("upsert", ("a", 20, "p1", "moved")),     # another partition: a second record
])
def test_what_the_model_does_not_decide_is_refused(operation, row):
    model = EventTimeModel({"a": ("a", 10, "p0", "x")})
    with pytest.raises(AmbiguousStep):
        model.apply(operation, [row])


def test_first_difference_names_the_first_key_in_key_order():
    model = [("a", 1, "p0", "x"), ("b", 1, "p0", "y"), ("c", 1, "p0", "z")]
    assert first_difference(list(model), model) is None
    assert "key 'b'" in first_difference([model[0], ("b", 1, "p0", "other"), ("c", 9, "p0", "z")], model)
    assert "key 'b': missing" in first_difference([model[0], model[2]], model)
    assert "key 'a': read 2 times" in first_difference([model[0], *model], model)
    assert "no such key" in first_difference([*model, ("d", 1, "p0", "w")], model)


class _FixedReaders(ThreeReaders):
    def __init__(self, table: JavaTable, readings: dict):
        super().__init__(java=type("J", (), {"bundle": table.bundle})(), table=table, spark=None)
        self._readings = readings

    def read_all(self, as_of=None):
        return self._readings


def test_a_reader_that_differs_fails_with_step_version_reader_and_key():
    table = JavaTable("/nowhere", "t", 8, HudiBundle(Path("hudi.jar"), "1.2.0"))
    model = [("k1", 1, "p0", "a"), ("k2", 2, "p1", "b")]
    readers = _FixedReaders(table, {"Java Hudi": model, "hudi-rs": model, "tablesvc": [model[0]]})
    with pytest.raises(AssertionError) as failed:
        readers.check("tablesvc compaction", model)
    text = str(failed.value)
    assert "'tablesvc compaction'" in text and "table version 8" in text
    assert "tablesvc (1 rows; model 2): key 'k2': missing" in text and "hudi-rs" not in text


def test_without_make_interop_the_setup_says_what_to_run(tmp_path):
    with pytest.raises(JavaHudiUnavailable, match="make interop"):
        JavaHudiSetup.from_env({})
    with pytest.raises(JavaHudiUnavailable, match="missing"):
        JavaHudiSetup.from_env({"TABLESVC_HUDI_PYTHON": str(tmp_path / "python"),
                                "TABLESVC_HUDI_JAR": str(tmp_path / "hudi.jar"), "TABLESVC_HUDI_VERSION": "1.2.0"})
