"""Test tables whose metadata table keeps only its ``files`` partition, made from Java-written
fixtures the way Apache Hudi drops a metadata partition (docs/metadata-table-write-research.md
§5): ``hoodie.table.metadata.partitions`` rewritten first (the partition is no longer available
to any reader), then the partition's folder deleted, then its index definition removed.  Also
what the metadata-table write tests compare: file slices as hudi-rs and tablesvc list them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from oracles.hudi_rs import file_slices as hudi_rs_slices

from tablesvc.storage import LocalStorage
from tablesvc.table.properties import read_properties, write_properties

FILES = "files"


def keep_only_files_partition(path: Path) -> list[str]:
    """Drop every metadata partition but ``files`` from the table at ``path``; returns those dropped."""
    storage = LocalStorage()
    props = read_properties(storage, str(path))
    listed = [p for p in props.get("hoodie.table.metadata.partitions", "").split(",") if p]
    dropped = [p for p in listed if p != FILES]
    props["hoodie.table.metadata.partitions"] = FILES
    props["hoodie.table.metadata.partitions.inflight"] = ""
    write_properties(storage, str(path), props)
    for name in dropped:
        shutil.rmtree(path / ".hoodie" / "metadata" / name, ignore_errors=True)
    index_defs = path / ".hoodie" / ".index_defs" / "index.json"
    if index_defs.exists():
        doc = json.loads(index_defs.read_text())
        doc["indexDefinitions"] = {k: v for k, v in doc.get("indexDefinitions", {}).items() if k not in dropped}
        index_defs.write_text(json.dumps(doc, indent=2))
    return dropped


def tablesvc_slices(table) -> list[tuple]:
    """(partition, file id, base file, log files, base size, log sizes) of tablesvc's latest slices."""
    return sorted((s.partition, s.file_id, s.base_file.file_name if s.base_file else None,
                   tuple(lf.file_name for lf in s.log_files),
                   s.base_file.size if s.base_file else None, tuple(lf.size for lf in s.log_files))
                  for s in table.file_system_view().latest_file_slices(table.storage))


def hudi_rs_slice_rows(path) -> list[tuple]:
    """The same tuples from hudi-rs (which lists v8+ tables through the metadata table)."""
    return sorted((s.partition_path, s.file_id, s.base_file_name or None, tuple(s.log_file_names),
                   s.base_file_size if s.base_file_name else None, tuple(s.log_file_sizes))
                  for s in hudi_rs_slices(str(path)))


def storage_slices(table) -> list[tuple]:
    """tablesvc's latest slices from a storage listing (the metadata table switched off)."""
    table.metadata_enabled = False
    try:
        return tablesvc_slices(table)
    finally:
        table.metadata_enabled = True


def metadata_listing(table) -> dict[str, dict[str, int]]:
    """Partition -> {file name: size} as the metadata table's ``files`` partition lists them."""
    from tablesvc.metadata import MetadataFileListing

    listing = MetadataFileListing(table.storage, table.base_path, table.timeline())
    return {p: listing.files(p) for p in listing.partitions()}


def storage_listing(path) -> dict[str, dict[str, int]]:
    """Partition -> {file name: size} of every data file (base or log) storage holds (not Hadoop's
    ``.crc`` files beside Java's)."""
    root = Path(path)
    out: dict[str, dict[str, int]] = {}
    for folder in sorted(p for p in [root, *root.rglob("*")] if p.is_dir()):
        rel = folder.relative_to(root).as_posix()
        if rel.startswith(".hoodie"):
            continue
        files = {f.name: f.stat().st_size for f in folder.iterdir() if f.is_file()
                 and (f.suffix == ".parquet" or ".log." in f.name) and not f.name.startswith(".tmp-")
                 and not f.name.endswith(".crc")}      # Hadoop's checksum siblings (Java's writes)
        if files:
            out["" if rel == "." else rel] = files
    return out


def check_listing_slices_and_rows(table, path, model: dict, columns: tuple[str, ...], step: str) -> None:
    """After ``step``: the metadata table's listing equals storage's; tablesvc's slices (through the
    metadata table), hudi-rs's and a storage listing's are equal; hudi-rs's rows and tablesvc's
    equal the model (key -> the other ``columns``)."""
    check_listing_slices_and_row_tuples(table, path, [(k, *v) for k, v in model.items()], columns, step)


def check_listing_slices_and_row_tuples(table, path, rows: list[tuple], columns: tuple[str, ...],
                                        step: str) -> None:
    """``check_listing_slices_and_rows`` with the model as row tuples in ``columns`` order."""
    from oracles.hudi_rs import sorted_rows

    expected = sorted(rows)
    try:
        assert table.uses_metadata_table
        assert metadata_listing(table) == storage_listing(path)
        assert tablesvc_slices(table) == hudi_rs_slice_rows(path) == storage_slices(table)
        assert sorted_rows(path, columns) == expected
        ours = table.read(columns=list(columns)).collect()
        assert sorted(tuple(r[c] for c in columns) for r in ours) == expected
    except AssertionError as e:
        raise AssertionError(f"after {step}: {e}") from e


def kill_a_clean_at_every_point(tmp_path, template) -> dict:
    """Runs ``tests/crash_harness.py --fork`` on copies of ``template``: a clean killed (SIGKILL)
    after each of its storage calls in turn; returns the harness's JSON run (every point killed)."""
    return kill_at_every_point(tmp_path, template, "clean")


def kill_at_every_point(tmp_path, template, *command: str) -> dict:
    """Runs ``tests/crash_harness.py --fork`` on copies of ``template``: ``command`` (the harness's
    action and arguments, e.g. ``rollback T --allow-completed``) killed (SIGKILL) after each of its
    storage calls in turn; returns the harness's JSON run (every point killed)."""
    import json
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(repo), TABLESVC_SPARK_LOG=str(tmp_path / "spark.log"))
    proc = subprocess.run([sys.executable, str(repo / "tests" / "crash_harness.py"), "--fork", str(template),
                           str(tmp_path / "points"), *command],
                          env=env, capture_output=True, text=True, timeout=900, start_new_session=True)
    assert proc.returncode == 0, f"harness failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    for p in run["points"]:
        assert (p["signal"], p["exit"]) == (signal.SIGKILL, None), p
    return run


def slices_agree(path) -> None:
    """tablesvc's slices (through the metadata table), hudi-rs's and a storage listing's are equal."""
    from tablesvc.api import Table

    table = Table.open(str(path))
    assert tablesvc_slices(table) == hudi_rs_slice_rows(path) == storage_slices(table)


def live_metadata_records(path) -> dict:
    """Every metadata partition's merged records, by partition and key; keys a DELETE block
    removed are left out."""
    from tablesvc.api import Table
    from tablesvc.metadata import MetadataTable
    from tablesvc.metadata.mdt_compaction import merge_for
    from tablesvc.metadata.mdt_compaction_plan import metadata_partitions
    from tablesvc.metadata.partition_reader import partition_records

    table = Table.open(str(path))
    reader = MetadataTable(table.storage, table.base_path, table.timeline())
    return {p: {k: v for k, v in partition_records(reader, p, merge_for(p)).items() if v is not None}
            for p in metadata_partitions(table.storage, reader.base_path)}


def tablesvc_row_tuples(path, columns: tuple[str, ...]) -> list[tuple]:
    """tablesvc's read of the table's latest slices, as sorted tuples of ``columns``."""
    from tablesvc.api import Table
    from tablesvc.merge import ReadContext, SliceSpec, read_file_slice

    table = Table.open(str(path))
    ctx = ReadContext.for_table(table)
    rows = []
    for s in table.latest_file_slices():
        rows += read_file_slice(table.storage, SliceSpec.from_file_slice(s), ctx).to_pylist()
    return sorted(tuple(r[c] for c in columns) for r in rows)


def finish_the_rollback_of(path, t: str, config):
    """Recover a table killed somewhere in a rollback of data instant ``t`` as an operator would a
    day later (the failed-writes pass, then ``tablesvc rollback t`` if ``t`` is still completed),
    and check that nothing of ``t`` is left on either timeline.  The table and its metadata table."""
    from tablesvc.api import Table
    from tablesvc.metadata import MetadataTable
    from tablesvc.services.rollback import rollback, rollback_failed
    from timeline.clock import ManualClock, SystemClock

    later = Table.open(str(path), clock=ManualClock(SystemClock().now_ms() + 24 * 3600 * 1000))
    rollback_failed(later, config=config)
    if Table.open(str(path)).timeline().is_completed(t):      # killed before the rollback was requested
        rollback(later, t, config=config, allow_completed=True)
    table = Table.open(str(path))
    mdt = MetadataTable(table.storage, table.base_path, table.timeline())
    assert table.timeline().pending() == () and mdt.timeline.pending() == ()
    assert table.timeline().files_of(t) == () and mdt.timeline.files_of(t) == ()
    return table, mdt


class Killed(BaseException):
    """A process killed in the middle of an action: nothing after the raise runs (a BaseException,
    so no ``except Exception`` of the code under test catches it)."""


def kill_after_the_first_log_file(monkeypatch, storage):
    """From now on, ``storage``'s class raises ``Killed`` right after the first log file it writes
    whole (``write_new`` of a name holding ``.log.``).  Returns what brings the process back to
    life (the real ``write_new`` again)."""
    storage_type = type(storage)
    real_write_new = storage_type.write_new

    def dying_write_new(self, p, data, *a, **k):
        out = real_write_new(self, p, data, *a, **k)
        if ".log." in p:
            raise Killed()
        return out

    monkeypatch.setattr(storage_type, "write_new", dying_write_new)
    return lambda: monkeypatch.setattr(storage_type, "write_new", real_write_new)
