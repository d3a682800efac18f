"""An S3 endpoint on loopback for the object-store tests: moto's server, in a process of its own.

``python tests/s3_server.py --port-file F`` serves moto's S3 (moto[server] >= 5.2.2, whose
``If-None-Match``/``If-Match`` answer 412 as S3 does) on a free 127.0.0.1 port and writes the port
to ``F`` once it listens.  moto checks a precondition and then stores the object in two steps with
no lock, on a threaded server, so two racing conditional PUTs could both succeed; real S3 decides
them atomically.  One lock around every request makes the emulator as atomic as S3 (requests are
served one at a time, which costs nothing at test sizes).

``S3Server`` (used by the session fixture ``s3_endpoint`` in tests/conftest.py) starts that process,
creates the test bucket, hands out the endpoint and the object-store options, and stops it.

The server process answers a small control API of its own under ``/__tablesvc__/`` (``S3Server``'s
``counters``/``reset_counters``: requests and body bytes per HTTP method (LIST apart from GET), for "requests per job and
bytes moved"; ``inject``/``faults``/``clear_faults``: the next N requests, optionally only of one
method or key, answer 503 SlowDown, are served late, lose their connection (served or not), or end
the server).
A separate process keeps moto's threads and state out of the test process (which forks in some
tests) and lets a test stop the endpoint without touching its own interpreter; it exits by itself
when the process that started it is gone.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

BUCKET = "tablesvc-test"
ACCESS_KEY = "testing-key"
SECRET_KEY = "testing-secret"
REGION = "us-east-1"


# -- the control API, served by the server process itself before moto sees a request ----------------
CONTROL_PREFIX = "/__tablesvc__/"   # no bucket can be named so (S3 bucket names take no '_')
FAULT_KINDS = ("slowdown", "delay", "drop", "lose", "exit")
# S3's answer to a client that sends too fast (503 SlowDown), which S3 clients retry with back-off
SLOWDOWN_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
                 b"<Message>Please reduce your request rate.</Message><RequestId>tablesvc-fault</RequestId></Error>")


class _Control:
    """The server process's counters and armed faults (one instance, guarded by its own lock, never
    by the lock that serialises moto: a delayed request must not hold the others up).

    A fault is a dict: ``kind`` (``slowdown``: a 503 SlowDown answer, moto never sees the request;
    ``delay``: wait ``delay_s`` seconds, then serve it, so it takes effect after a client that timed
    out gave up, as on S3; ``drop``: close the connection without an answer, moto never sees the
    request; ``lose``: serve it, then close the connection without the answer, so the request took
    effect and the client cannot know; ``exit``: the server process exits on the spot, every later
    request is refused), ``count`` requests faulted,
    after ``skip`` matching ones passed; it matches a request of ``method`` (any when None) whose
    path contains ``key`` (any when None) and not ``except_key``."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts: dict[str, list[int]] = {}     # method -> [requests, request bytes, response bytes]
        self.applied: dict[str, int] = {}           # fault kind -> requests it hit
        self.faults: list[dict] = []

    def count(self, method: str, request_bytes: int, response_bytes: int) -> None:
        with self.lock:
            row = self.counts.setdefault(method, [0, 0, 0])
            row[0] += 1
            row[1] += request_bytes
            row[2] += response_bytes

    def fault_for(self, method: str, path: str) -> dict | None:
        chosen = None
        with self.lock:
            for fault in self.faults:
                if fault["method"] not in (None, method) or (fault["key"] is not None and fault["key"] not in path) \
                        or (fault["except_key"] is not None and fault["except_key"] in path):
                    continue
                if fault["skip"] > 0:
                    fault["skip"] -= 1
                elif fault["count"] > 0 and chosen is None:
                    fault["count"] -= 1
                    chosen = fault
            if chosen is not None:
                self.applied[chosen["kind"]] = self.applied.get(chosen["kind"], 0) + 1
        return chosen

    def arm(self, spec: dict) -> dict:
        fault = {"kind": spec["kind"], "count": int(spec.get("count", 1)), "skip": int(spec.get("skip", 0)),
                 "method": spec.get("method"), "key": spec.get("key"), "except_key": spec.get("except_key"),
                 "delay_s": float(spec.get("delay_s", 0))}
        if fault["kind"] not in FAULT_KINDS or fault["count"] < 0 or fault["skip"] < 0:
            raise ValueError(f"bad fault {spec}")
        with self.lock:
            self.faults.append(fault)
        return fault

    def answer(self, method: str, path: str, body: bytes) -> tuple[str, bytes]:
        """(status, JSON body) of a control request."""
        action = path[len(CONTROL_PREFIX):].strip("/")
        with self.lock:
            if (method, action) == ("GET", "counters"):
                return "200 OK", json.dumps({"methods": self.counts, "faults_applied": self.applied}).encode()
            if (method, action) == ("POST", "counters/reset"):
                self.counts, self.applied = {}, {}
                return "200 OK", b"{}"
            if (method, action) == ("GET", "faults"):
                return "200 OK", json.dumps(self.faults).encode()
            if (method, action) == ("DELETE", "faults"):
                self.faults = []
                return "200 OK", b"[]"
        if (method, action) == ("POST", "faults"):
            try:
                return "200 OK", json.dumps(self.arm(json.loads(body))).encode()
            except (ValueError, KeyError, TypeError) as e:
                return "400 Bad Request", json.dumps({"error": str(e)}).encode()
        return "404 Not Found", json.dumps({"error": f"no control call {method} {path}"}).encode()


def _drain(environ) -> int:
    """Read the request body (a keep-alive connection must not be left with one unread); its size."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    left = length
    while left > 0:
        chunk = environ["wsgi.input"].read(min(left, 1 << 20))
        if not chunk:
            break
        left -= len(chunk)
    return length


def _serve(port_file: str) -> None:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()
    control = _Control()

    def serialised(environ, start_response):
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        if path.startswith(CONTROL_PREFIX):
            size = int(environ.get("CONTENT_LENGTH") or 0)
            status, body = control.answer(method, path, environ["wsgi.input"].read(size) if size else b"")
            start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        request_bytes = int(environ.get("CONTENT_LENGTH") or 0)
        fault = control.fault_for(method, path)
        query = environ.get("QUERY_STRING", "")
        # counted apart from object GETs: a listing (``GET /bucket?list-type=2&prefix=...``)
        counted = "LIST" if method == "GET" and ("list-type=" in query or "prefix=" in query) else method
        if fault is not None and fault["kind"] == "exit":
            os._exit(0)                     # the endpoint is gone: this request and all later ones fail
        if fault is not None and fault["kind"] in ("drop", "lose"):
            if fault["kind"] == "lose":       # moto serves it; its answer never leaves
                with lock:
                    list(app(environ, lambda *_a, **_k: (lambda _data: None)))
            else:
                _drain(environ)
            control.count(counted, request_bytes, 0)
            sock = environ.get("werkzeug.socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))   # RST, no answer
                sock.shutdown(socket.SHUT_RDWR)
            raise ConnectionAbortedError(f"fault: connection {fault['kind']}")
        if fault is not None and fault["kind"] == "slowdown":
            _drain(environ)
            control.count(counted, request_bytes, len(SLOWDOWN_BODY))
            start_response("503 Slow Down", [("Content-Type", "application/xml"),
                                              ("Content-Length", str(len(SLOWDOWN_BODY)))])
            return [SLOWDOWN_BODY]
        if fault is not None and fault["kind"] == "delay":
            time.sleep(fault["delay_s"])    # outside the lock: other requests go on meanwhile
        with lock:
            # the body is produced inside the lock too: moto builds it before returning
            chunks = list(app(environ, start_response))
        control.count(counted, request_bytes, sum(len(c) for c in chunks))
        return chunks

    parent = os.getppid()

    def exit_with_parent() -> None:  # a test run that dies without stopping us takes us along
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(0)

    threading.Thread(target=exit_with_parent, daemon=True).start()
    server = make_server("127.0.0.1", 0, serialised, threaded=True, request_handler=MotoRequestHandler)
    Path(port_file + ".tmp").write_text(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


@dataclass(frozen=True)
class MethodCounts:
    requests: int
    request_bytes: int
    response_bytes: int


@dataclass(frozen=True)
class RequestCounters:
    """What the endpoint served since its start or the last ``reset_counters()``: per HTTP method,
    the requests (faulted ones included) and the bytes of request and response bodies; and how many
    requests each fault kind hit.  Control calls are not counted."""

    by_method: dict[str, MethodCounts]
    faults_applied: dict[str, int]

    @property
    def requests(self) -> int:
        return sum(m.requests for m in self.by_method.values())

    @property
    def request_bytes(self) -> int:
        return sum(m.request_bytes for m in self.by_method.values())

    @property
    def response_bytes(self) -> int:
        return sum(m.response_bytes for m in self.by_method.values())

    def of(self, method: str) -> MethodCounts:
        return self.by_method.get(method, MethodCounts(0, 0, 0))

    def as_dict(self) -> dict:
        return {"requests": self.requests, "request_bytes": self.request_bytes,
                "response_bytes": self.response_bytes,
                "by_method": {k: vars(v) for k, v in sorted(self.by_method.items())},
                "faults_applied": dict(self.faults_applied)}


@dataclass
class S3Server:
    """A running moto S3 process with one bucket (``BUCKET``) and fixed test credentials."""

    process: subprocess.Popen
    port: int
    bucket: str = BUCKET
    _stopped: bool = field(default=False, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def options(self) -> dict[str, str]:
        """Object-store options in object_store's own key names (obstore and hudi-rs take them)."""
        return {"aws_endpoint_url": self.endpoint, "aws_allow_http": "true", "aws_access_key_id": ACCESS_KEY,
                "aws_secret_access_key": SECRET_KEY, "aws_region": REGION}

    def env(self) -> dict[str, str]:
        """The same settings as environment variables, for child processes."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION}

    def s3a_conf(self, **override: str) -> list[str]:
        """``--conf`` arguments giving the CLI this endpoint and its credentials in Hadoop S3A's key
        names, as a Java Hudi user writes them (``override``: more keys, or other values)."""
        keys = {"fs.s3a.endpoint": f"127.0.0.1:{self.port}", "fs.s3a.connection.ssl.enabled": "false",
                "fs.s3a.path.style.access": "true", "fs.s3a.endpoint.region": REGION,
                "fs.s3a.access.key": ACCESS_KEY, "fs.s3a.secret.key": SECRET_KEY} | override
        return [arg for key, value in keys.items() for arg in ("--conf", f"{key}={value}")]

    def url(self, *parts: str) -> str:
        return "/".join([f"s3://{self.bucket}", *(p.strip("/") for p in parts if p)])

    # -- control (tests/s3_server.py's own API under CONTROL_PREFIX, never seen by moto) -------------
    def _control(self, method: str, action: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.endpoint + CONTROL_PREFIX + action, data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"S3 server control {method} {action}: {e.code} {e.read()[:300]!r}") from None

    def counters(self) -> RequestCounters:
        raw = self._control("GET", "counters")
        return RequestCounters({m: MethodCounts(*row) for m, row in raw["methods"].items()},
                               dict(raw["faults_applied"]))

    def reset_counters(self) -> None:
        self._control("POST", "counters/reset")

    def inject(self, kind: str, count: int = 1, *, method: str | None = None, key: str | None = None,
               except_key: str | None = None, skip: int = 0, delay_s: float = 0.0) -> None:
        """Arm a fault (``_Control``): the ``count`` requests (of ``method``, whose path contains
        ``key`` and not ``except_key``) that follow the next ``skip`` such requests answer 503
        SlowDown (``slowdown``), are served ``delay_s`` late (``delay``), lose their connection
        unanswered, unserved (``drop``) or served (``lose``), or end the server process (``exit``:
        the endpoint is gone, its objects with it)."""
        self._control("POST", "faults", {"kind": kind, "count": count, "method": method, "key": key,
                                         "except_key": except_key, "skip": skip, "delay_s": delay_s})

    def faults(self) -> list[dict]:
        """The armed faults with what is left of their ``skip`` and ``count``."""
        return self._control("GET", "faults")

    def clear_faults(self) -> None:
        self._control("DELETE", "faults")

    @classmethod
    def start(cls, timeout_s: float = 20.0) -> "S3Server":
        folder = tempfile.mkdtemp(prefix="s3server-")
        port_file = os.path.join(folder, "port")
        log = open(os.path.join(folder, "log"), "wb")
        process = subprocess.Popen([sys.executable, __file__, "--port-file", port_file], stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not os.path.exists(port_file):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait()
                log.close()
                raise RuntimeError(f"the moto S3 server did not start (exit {process.returncode}): "
                                   + Path(folder, "log").read_text(errors="replace")[-2000:])
            time.sleep(0.05)
        port = int(Path(port_file).read_text())
        server = cls(process, port)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        server._create_bucket()
        return server

    def _create_bucket(self) -> None:
        import boto3

        boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                     aws_secret_access_key=SECRET_KEY).create_bucket(Bucket=self.bucket)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--port-file":
        sys.exit("usage: s3_server.py --port-file FILE")
    _serve(sys.argv[2])


def copy_table_to_s3(server: "S3Server", name: str, folder: str = "tables"):
    """A carried fixture table (``tests/data/hudi/tables/<name>``) copied file by file to a fresh
    prefix of the server's bucket: ``(storage, url)`` of the copy."""
    import uuid

    from fixture_tables import TABLES_DIR
    from tablesvc.storage import storage_for

    local = TABLES_DIR / name
    root = server.url(folder, uuid.uuid4().hex, name)
    storage = storage_for(root, server.options())
    copied = 0
    for path in sorted(local.rglob("*")):
        if path.is_file():
            storage.write_new(f"{root}/{path.relative_to(local).as_posix()}", path.read_bytes())
            copied += 1
    assert copied > 5, f"{local}: only {copied} files"
    return storage, root
