"""GCS compare-and-swap goes by the object's generation, not its ETag.

No emulator here takes object_store's GCS writes (fake-gcs-server lacks the XML API; see
docs/storage-research.md §7.3), so these tests stand a small HTTP server in for GCS's XML endpoint and
look at the requests obstore's own GCS client sends: the conditional update must carry
``x-goog-if-generation-match`` with the generation ``read_versioned`` returned, and the token handed
back must be the generation GCS answered (``x-goog-generation``).  What GCS itself then decides is
not tested here (docs/storage.md says so).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pytest

from tablesvc.storage.object_store import ObjectStorage, update_mode

BUCKET = "tablesvc-gcs"


class _FakeGcsXml(BaseHTTPRequestHandler):
    """GET answers the stored body with its generation; PUT honours ``x-goog-if-generation-match``
    (0: only if absent) the way GCS documents it, bumping the generation."""

    objects: dict[str, tuple[bytes, int]] = {}
    requests: list[tuple[str, str, dict[str, str]]] = []
    generation = 1_700_000_000_000_000

    def log_message(self, *args):  # keep pytest's output clean
        pass

    def _key(self) -> str:
        return unquote(self.path.split("?", 1)[0]).removeprefix(f"/{BUCKET}/")

    def _answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802  (http.server's naming)
        type(self).requests.append(("GET", self._key(), dict(self.headers)))
        found = self.objects.get(self._key())
        if found is None:
            self._answer(404, b"<Error><Code>NoSuchKey</Code></Error>")
            return
        body, gen = found
        self._answer(200, body, {"ETag": f'"etag-{gen}"', "x-goog-generation": str(gen),
                                 "Last-Modified": "Fri, 27 Nov 2026 20:00:00 GMT"})

    def do_PUT(self):  # noqa: N802
        headers = {k.lower(): v for k, v in self.headers.items()}
        type(self).requests.append(("PUT", self._key(), headers))
        body = self.rfile.read(int(headers.get("content-length", "0")))
        current = self.objects.get(self._key())
        wanted = headers.get("x-goog-if-generation-match")
        if wanted is not None and int(wanted) != (current[1] if current else 0):
            self._answer(412, b"<Error><Code>PreconditionFailed</Code></Error>")
            return
        type(self).generation += 1
        gen = type(self).generation
        self.objects[self._key()] = (body, gen)
        self._answer(200, b"", {"ETag": f'"etag-{gen}"', "x-goog-generation": str(gen)})


@pytest.fixture()
def gcs_xml():
    _FakeGcsXml.objects = {}
    _FakeGcsXml.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeGcsXml)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    # object_store's GCS client with OAuth off, pointed at the stand-in (the key fields must exist)
    key = json.dumps({"gcs_base_url": base, "disable_oauth": True, "client_email": "", "private_key": "",
                      "private_key_id": ""})
    storage = ObjectStorage({"google_service_account_key": key, "allow_http": "true",
                             "tablesvc.storage.max.retries": "0"})
    yield storage, _FakeGcsXml
    server.shutdown()


def test_the_update_mode_names_the_field_each_store_compares():
    assert update_mode("gs", "17") == {"version": "17"}
    assert update_mode("s3", '"abc"') == {"e_tag": '"abc"'}
    assert update_mode("s3a", '"abc"') == {"e_tag": '"abc"'}
    assert update_mode("az", '"0x1"') == {"e_tag": '"0x1"'}
    assert update_mode("abfss", '"0x1"') == {"e_tag": '"0x1"'}


def test_a_gcs_compare_and_swap_sends_the_generation_and_returns_the_new_one(gcs_xml):
    storage, server = gcs_xml
    url = f"gs://{BUCKET}/t/.hoodie/.locks/table_lock.json"

    created = storage.write_if(url, b"first", None)
    put = [r for r in server.requests if r[0] == "PUT"][-1]
    assert put[2].get("x-goog-if-generation-match") == "0"      # create only if absent
    assert put[2].get("x-goog-meta-tablesvcwriter")              # the write's token, for a retried PUT
    assert created == str(server.objects["t/.hoodie/.locks/table_lock.json"][1])

    body, version = storage.read_versioned(url)
    assert (body, version) == (b"first", created)

    updated = storage.write_if(url, b"second", version)
    put = [r for r in server.requests if r[0] == "PUT"][-1]
    assert put[2].get("x-goog-if-generation-match") == version
    assert updated != version and storage.read_versioned(url) == (b"second", updated)


def test_a_gcs_compare_and_swap_on_a_stale_generation_is_a_lost_race(gcs_xml):
    from timeline.errors import VersionConflictError

    storage, server = gcs_xml
    url = f"gs://{BUCKET}/lock.json"
    first = storage.write_if(url, b"a", None)
    storage.write_if(url, b"b", first)
    with pytest.raises(VersionConflictError, match="lock.json"):
        storage.write_if(url, b"c", first)
    assert storage.read_bytes(url) == b"b"
