"""The S3 side of the compaction and read benchmarks (issue #28): the benchmark tables copied to
the moto endpoint of the test session (``s3_endpoint``, tests/s3_server.py), fresh copies made
on the server for the cases that change their table, and the endpoint's request counters taken
per timed job.

moto on loopback serves one request at a time and stores objects in its own process, so its times
are not S3's; what carries over to S3 is what a job asks of the store: requests by HTTP method and
the bytes of request bodies (uploaded to the store) and of response bodies (downloaded from it).
Those come from the server's own counters (``S3Server.counters``), which see every request of the
driver and of the Spark tasks alike.  The server counts per HTTP method, and a LIST (``GET ?list-type=2``)
apart from the object GETs.

Copies are made outside every timing: the local table's files are uploaded once from the test
process (streamed from disk by boto3), and every further copy is a server-side ``CopyObject``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

METHODS = ("GET", "LIST", "PUT", "HEAD", "POST", "DELETE")   # what the report lists, in this order


def s3_client(server):
    import boto3
    from s3_server import ACCESS_KEY, REGION, SECRET_KEY

    return boto3.client("s3", endpoint_url=server.endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY)


def key_of(server, url: str) -> str:
    prefix = f"s3://{server.bucket}/"
    assert url.startswith(prefix), url
    return url[len(prefix):]


def upload_table(server, local: str | Path, folder: str) -> str:
    """Every file of the table at ``local`` uploaded under a fresh prefix: the copy's ``s3://`` URL."""
    client = s3_client(server)
    root = server.url(folder, uuid.uuid4().hex[:12], Path(local).name)
    uploaded = 0
    for path in sorted(Path(local).rglob("*")):
        if path.is_file():
            client.upload_file(str(path), server.bucket, f"{key_of(server, root)}/{path.relative_to(local).as_posix()}")
            uploaded += 1
    assert uploaded > 20, f"{local}: only {uploaded} files uploaded"
    return root


def list_keys(client, bucket: str, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix.rstrip("/") + "/"):
        keys.extend(o["Key"] for o in page.get("Contents", ()))
    return keys


def delete_tree(server, root: str) -> None:
    client = s3_client(server)
    keys = list_keys(client, server.bucket, key_of(server, root))
    for i in range(0, len(keys), 1000):
        client.delete_objects(Bucket=server.bucket, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]]})


def copy_tree(server, source: str, target: str) -> None:
    """``source``'s objects copied to ``target`` on the server (CopyObject: no data through this process);
    whatever ``target`` held first is deleted."""
    client = s3_client(server)
    delete_tree(server, target)
    src, dst = key_of(server, source), key_of(server, target)
    for key in list_keys(client, server.bucket, src):
        client.copy_object(Bucket=server.bucket, Key=dst + key[len(src):], CopySource={"Bucket": server.bucket, "Key": key})


def tree_bytes(server, root: str) -> tuple[int, int]:
    """(objects, bytes) under ``root``."""
    client = s3_client(server)
    total = count = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=server.bucket,
                                                                  Prefix=key_of(server, root) + "/"):
        for o in page.get("Contents", ()):
            count += 1
            total += o["Size"]
    return count, total


@dataclass
class JobCounts:
    """The endpoint's counters of each timed S3 run, warm-up runs included.

    ``paired`` calls ``before_ours`` (fresh copy, then ``start``), the S3 job, then the next pair's
    ``before_theirs`` (``take``) before the local job, so no control call falls inside a timing and
    no copy request is counted."""

    server: Any
    runs: list[dict] = field(default_factory=list)
    _open: bool = False

    def start(self) -> None:
        self.server.reset_counters()
        self._open = True

    def take(self) -> None:
        if self._open:
            self.runs.append(self.server.counters().as_dict())
            self._open = False

    def before_s3(self, prepare: Callable[[], Any] | None = None) -> Callable[[], None]:
        def before() -> None:
            self.take()
            if prepare is not None:
                prepare()
            self.start()
        return before

    def summary(self, warmup: int) -> dict:
        """The timed runs' counters: the per-method figures of the run with the median request count
        (runs of one job on one table ask the same), with every timed run's request total."""
        self.take()
        timed = self.runs[warmup:]
        assert timed, "no S3 run was counted"
        totals = [r["requests"] for r in timed]
        median = sorted(timed, key=lambda r: r["requests"])[(len(timed) - 1) // 2]
        return {"requests": median["requests"], "by_method": {m: median["by_method"].get(m, {}).get("requests", 0)
                                                              for m in METHODS},
                "bytes_in": median["request_bytes"], "bytes_out": median["response_bytes"],
                "requests_per_run": totals, "requests_spread": max(totals) - min(totals),
                "by_method_bytes": median["by_method"], "faults_applied": median["faults_applied"]}


def s3_notes(counts: dict) -> str:
    """The counters in words, for the report's notes."""
    methods = ", ".join(f"{m} {counts['by_method'][m]}" for m in METHODS if counts["by_method"][m])
    return (f"S3 requests per job (moto's counters, the run of median request count): "
            f"{counts['requests']:,} ({methods}), every timed run {counts['requests_per_run']}; bytes moved: "
            f"{counts['bytes_in'] / 1e6:.2f} MB in (request bodies: uploads), {counts['bytes_out'] / 1e6:.2f} MB out "
            f"(response bodies: downloads, listings)")


def paired_s3(server, s3_job: Callable[[], Any], local_job: Callable[[], Any], *,
              prepare_s3: Callable[[], Any] | None = None, prepare_local: Callable[[], Any] | None = None):
    """``bench_harness.paired`` of the same job on the S3 copy (``ours``) and on local files (``theirs``),
    alternating, with the endpoint's counters of every S3 run: (s3, local, counts summary)."""
    import bench_harness

    counts = JobCounts(server)

    def before_local() -> None:
        counts.take()
        if prepare_local is not None:
            prepare_local()

    s3, local = bench_harness.paired(s3_job, local_job, before_ours=counts.before_s3(prepare_s3),
                                     before_theirs=before_local)
    return s3, local, counts.summary(bench_harness.warmups())


def hudi_rs_partition(url: str, options: dict | None, column: str, value: str, columns) -> list[tuple]:
    """One partition's rows (``columns``), sorted, as hudi-rs reads them (from S3 with ``options``):
    the independent reader's check without reading the whole table into this process."""
    import pyarrow as pa
    from hudi import HudiReadOptions
    from oracles.hudi_rs import hudi_table

    batches = hudi_table(url, options).read(HudiReadOptions().with_filters([(column, "=", value)])
                                            .with_projection(list(columns)))
    rows = pa.Table.from_batches(batches).select(list(columns)).to_pylist() if batches else []
    return sorted(tuple(r[c] for c in columns) for r in rows)
