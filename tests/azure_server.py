"""An Azure Blob endpoint on loopback for the ``az://`` / ``abfs[s]://`` tests: Azurite's blob service.

``make test`` installs Azurite (``AZURITE_VERSION``, from npm) into ``.cache/azurite``;
``AzureServer.start()`` (the session fixture ``azure_endpoint`` in tests/conftest.py) runs its
``azurite-blob`` in a process of its own on a port the OS picks, in memory, creates the test
container, hands out the endpoint's options and URLs, and stops it.  Where ``azurite_blob()``
finds no ``azurite-blob`` (no npm on the machine), the fixture skips its tests with one line.

Azurite checks a conditional PUT and stores the blob in one single-threaded Node process, and racing
conditional creates and If-Match updates each had exactly one winner against it
(docs/storage-research.md §7.2, and the races in the tests), so unlike tests/s3_server.py nothing is
put in front of it (no request counters or fault injection either).  It emulates the Blob API only:
an ``abfss://`` URL reaches the same blobs through it, but ADLS Gen2's hierarchical namespace (real
folders, atomic renames) is not emulated.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import hmac
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path

AZURITE_VERSION = "3.35.0"      # the last release that declares Node 20 support (docs/storage-research.md §7.1)
REPO = Path(__file__).resolve().parent.parent
INSTALLED_BLOB = REPO / ".cache" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
ACCOUNT = "devstoreaccount1"
# Azurite's one built-in account key, printed in its own documentation: a well-known value, no secret
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
CONTAINER = "tablesvc-test"
_LISTENING = re.compile(rb"successfully listens on http://127\.0\.0\.1:(\d+)")
_API_VERSION = "2021-08-06"


def azurite_blob() -> str | None:
    """The ``azurite-blob`` to run: the one ``make test`` installed, else one on ``PATH``."""
    if INSTALLED_BLOB.exists():
        return str(INSTALLED_BLOB)
    return shutil.which("azurite-blob")


# looked up here, not in the forked child: a dlopen after fork in a threaded process can deadlock
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:
    """In the child before exec: the kernel sends it SIGTERM when the test process is gone, so a
    killed pytest leaves no Azurite behind (Node cannot watch its parent as s3_server.py does)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)     # 1: PR_SET_PDEATHSIG


def shared_key_headers(method: str, path: str, query: dict[str, str]) -> dict[str, str]:
    """Headers of a body-less request signed with the account key (Azure's Shared Key scheme): the
    string signed is the verb, eleven empty standard headers, the ``x-ms-`` headers, then the
    resource (account, path on the emulator's path-style URL, query parameters sorted)."""
    headers = {"x-ms-date": formatdate(usegmt=True), "x-ms-version": _API_VERSION}
    canonical_headers = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()))
    resource = f"/{ACCOUNT}{path}" + "".join(f"\n{k}:{v}" for k, v in sorted(query.items()))
    to_sign = method + "\n" * 12 + canonical_headers + resource
    digest = hmac.new(base64.b64decode(ACCOUNT_KEY), to_sign.encode(), hashlib.sha256).digest()
    headers["Authorization"] = f"SharedKey {ACCOUNT}:{base64.b64encode(digest).decode()}"
    return headers


@dataclass
class AzureServer:
    """A running Azurite blob service with one container (``CONTAINER``) of the dev account."""

    process: subprocess.Popen
    port: int
    folder: str
    container: str = CONTAINER
    _stopped: bool = field(default=False, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    def options(self) -> dict[str, str]:
        """Storage options in object_store's short key names, which obstore and hudi-rs both take
        (``conf()`` gives the long ``azure_storage_*`` ones)."""
        return {"endpoint": self.endpoint, "account_name": ACCOUNT, "account_key": ACCOUNT_KEY, "allow_http": "true"}

    def env(self) -> dict[str, str]:
        """The same settings as the environment variables object_store reads, for child processes."""
        return {"AZURE_STORAGE_ENDPOINT": self.endpoint, "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT,
                "AZURE_STORAGE_ACCOUNT_KEY": ACCOUNT_KEY, "AZURE_ALLOW_HTTP": "true"}

    def conf(self, **override: str) -> list[str]:
        """``--conf`` arguments giving the CLI this endpoint (object_store's ``azure_*`` names, the
        ones the CLI hands to the storage; ``override``: more keys, or other values)."""
        keys = {"azure_storage_endpoint": self.endpoint, "azure_storage_account_name": ACCOUNT,
                "azure_storage_account_key": ACCOUNT_KEY, "azure_allow_http": "true"} | override
        return [arg for key, value in keys.items() for arg in ("--conf", f"{key}={value}")]

    def url(self, *parts: str, scheme: str = "az") -> str:
        """``az://container/parts…``, or ``abfss://container@account.dfs.core.windows.net/parts…``."""
        root = (f"{scheme}://{self.container}@{ACCOUNT}.dfs.core.windows.net" if scheme in ("abfs", "abfss")
                else f"{scheme}://{self.container}")
        return "/".join([root, *(p.strip("/") for p in parts if p)])

    @classmethod
    def start(cls, timeout_s: float = 30.0) -> "AzureServer":
        blob = azurite_blob()
        if blob is None:
            raise FileNotFoundError(f"azurite-blob: not installed ({INSTALLED_BLOB} absent, none on PATH)")
        folder = tempfile.mkdtemp(prefix="azurite-")
        log_path = os.path.join(folder, "log")
        # port 0: the OS picks a free one and Azurite prints it, so no other process can take it first;
        # in memory: nothing written to the working folder (which --location would set, but the two
        # options exclude each other)
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [blob, "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence",
                 "--disableTelemetry", "--skipApiVersionCheck", "--loose", "--silent"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder,
                start_new_session=True, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout_s
        while True:
            found = _LISTENING.search(Path(log_path).read_bytes())
            if found:
                break
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait()
                output = Path(log_path).read_text(errors="replace")[-2000:]
                shutil.rmtree(folder, ignore_errors=True)
                raise RuntimeError(f"azurite-blob did not start (exit {process.returncode}): "
                                   + output)
            time.sleep(0.05)
        server = cls(process, int(found.group(1)), folder)
        try:
            server.create_container(server.container)
        except BaseException:
            server.stop()
            raise
        return server

    def create_container(self, name: str) -> None:
        """obstore cannot create a container: one signed ``PUT ?restype=container``."""
        query = {"restype": "container"}
        request = urllib.request.Request(f"{self.endpoint}/{name}?restype=container", method="PUT",
                                         headers=shared_key_headers("PUT", f"/{ACCOUNT}/{name}", query))
        try:
            with urllib.request.urlopen(request, timeout=10):
                pass
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"Azurite: creating container {name}: {e.code} {e.read()[:300]!r}") from None

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
        shutil.rmtree(self.folder, ignore_errors=True)


def copy_table_to_azure(server: AzureServer, name: str, folder: str = "tables"):
    """A carried fixture table (``tests/data/hudi/tables/<name>``) copied file by file to a fresh
    prefix of the container: ``(storage, url)`` of the copy (an ``az://`` URL)."""
    import uuid

    from fixture_tables import TABLES_DIR
    from tablesvc.storage import storage_for

    local = TABLES_DIR / name
    root = server.url(folder, uuid.uuid4().hex, name)
    storage = storage_for(root, server.options())
    files = sorted(p for p in local.rglob("*") if p.is_file())
    for path in files:
        storage.write_new(f"{root}/{path.relative_to(local).as_posix()}", path.read_bytes())
    assert len(files) > 5, f"{local}: only {len(files)} files"
    return storage, root
