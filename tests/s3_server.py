"""An S3 endpoint on loopback for the object-store tests: moto's server, in a process of its own.

``python tests/s3_server.py --port-file F`` serves moto's S3 (moto[server] >= 5.2.2, whose
``If-None-Match``/``If-Match`` answer 412 as S3 does) on a free 127.0.0.1 port and writes the port
to ``F`` once it listens.  moto checks a precondition and then stores the object in two steps with
no lock, on a threaded server, so two racing conditional PUTs could both succeed; real S3 decides
them atomically.  One lock around every request makes the emulator as atomic as S3 (requests are
served one at a time, which costs nothing at test sizes).

``S3Server`` (used by the session fixture ``s3_endpoint`` in tests/conftest.py) starts that process,
creates the test bucket, hands out the endpoint and the object-store options, and stops it.
A separate process keeps moto's threads and state out of the test process (which forks in some
tests) and lets a test stop the endpoint without touching its own interpreter; it exits by itself
when the process that started it is gone.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BUCKET = "tablesvc-test"
ACCESS_KEY = "testing-key"
SECRET_KEY = "testing-secret"
REGION = "us-east-1"


def _serve(port_file: str) -> None:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def serialised(environ, start_response):
        with lock:
            # the body is produced inside the lock too: moto builds it before returning
            return list(app(environ, start_response))

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

    def url(self, *parts: str) -> str:
        return "/".join([f"s3://{self.bucket}", *(p.strip("/") for p in parts if p)])

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
