"""Object-store storage (S3 first; GCS and Azure through the same class) over obstore.

``ObjectStorage`` implements ``timeline.storage.Storage`` on an object store, with paths given as
URLs (``s3://bucket/key``; ``s3a://`` is the same store).  What each call becomes (docs/storage.md):

* ``write_new`` / ``write_new_from``: one PUT with ``If-None-Match: *`` (obstore ``mode="create"``,
  which never uses multipart), carrying a per-write token in user metadata.  A 412 means the
  object exists: if its token is ours, our own PUT succeeded and only its answer was lost (obstore
  retries a PUT whose response it did not get), so the create is done; else ``FileExistsError``.
* ``write_replace``: one plain PUT (single part: atomic, never a partial upload left behind).
* ``discard_partial``: nothing to discard, since no multipart upload is ever started; ``[]``.
* ``list_dir`` / ``list_names``: one LIST with delimiter; common prefixes come back as folders.
* ``read_bytes``: one GET.  ``open_read``: one GET of the object's last ``WHOLE_READ_MAX`` bytes
  (the whole object when no larger; no HEAD), then ranged GETs for the rest of a larger one.
* ``stat`` / ``exists``: HEAD; a key that is no object but a prefix of some is a folder.
* ``makedirs``: nothing (object stores have no folders).

Clients are per process: one store per (spec, pid), built lazily, so a pickled ``ObjectStorage``
(Spark tasks) carries no client and no credentials, and each process builds its own client after
it starts.  obstore's runtime does not survive ``fork`` once used, so a forked child that calls it
gets a ``StorageError`` saying so instead of hanging.
"""

from __future__ import annotations

import errno
import io
import os
import re
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import BinaryIO, Callable, Iterable, Mapping

from timeline.errors import StorageError, VersionConflictError
from timeline.storage import FileInfo

# URL schemes -> the obstore store family
SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure"}

# user metadata naming the creating write (x-amz-meta-tablesvcwriter on S3): letters only, since Azure takes
# metadata names that are identifiers (no "-") and some S3 front ends drop header names with "_"
WRITER_ATTRIBUTE = "tablesvcwriter"

# Hadoop S3A key (with or without ``spark.hadoop.``) -> object_store's S3 key
_S3A_KEYS = {
    "fs.s3a.endpoint": "endpoint",
    "fs.s3a.endpoint.region": "region",
    "fs.s3a.access.key": "access_key_id",
    "fs.s3a.secret.key": "secret_access_key",
    "fs.s3a.session.token": "token",
}
# object_store spellings that mean the same S3 key
_S3_ALIASES = {"aws_endpoint_url": "endpoint", "endpoint_url": "endpoint", "aws_endpoint": "endpoint",
               "aws_region": "region", "aws_default_region": "region", "default_region": "region",
               "aws_access_key_id": "access_key_id", "aws_secret_access_key": "secret_access_key",
               "aws_session_token": "token", "session_token": "token", "aws_token": "token",
               "aws_virtual_hosted_style_request": "virtual_hosted_style_request",
               "aws_skip_signature": "skip_signature", "aws_conditional_put": "conditional_put"}
# client options (obstore ClientConfig), which must not go into the store config: ``allow_http`` as a
# store keyword breaks pickling of the store (docs/storage-research.md §1.2)
_CLIENT_KEYS = {"allow_http", "allow_invalid_certificates", "connect_timeout", "timeout", "pool_idle_timeout",
                "pool_max_idle_per_host", "proxy_url", "http1_only", "http2_only", "user_agent", "read_timeout"}
RETRY_TIMEOUT_KEY = "tablesvc.storage.retry.timeout.ms"
# A conditional create answered "already exists" with no object there (S3's 409) is asked again.
_CREATE_ATTEMPTS = 4
_CREATE_CONFLICT_BACKOFF_S = 0.2
MAX_RETRIES_KEY = "tablesvc.storage.max.retries"
_SECRET_WORDS = ("secret", "token", "password", "access_key", "account_key", "sas", "service_account")


def is_object_store_url(path: str) -> bool:
    return path.split("://", 1)[0].lower() in SCHEMES if "://" in path else False


def _is_secret(key: str) -> bool:
    return any(word in key for word in _SECRET_WORDS)


def normalize_options(options: Mapping[str, str] | None) -> dict[str, str]:
    """Options in obstore's lower-case names: object_store's own (``aws_endpoint_url``, ``endpoint``,
    ``AWS_REGION``, ...), Hadoop S3A's (``fs.s3a.endpoint``, ``spark.hadoop.fs.s3a.access.key``, ...)
    and tablesvc's (``tablesvc.storage.*``).  Keys of other families are left out."""
    out: dict[str, str] = {}
    ssl_off = False
    for raw_key, value in (options or {}).items():
        key = raw_key[len("spark.hadoop."):] if raw_key.startswith("spark.hadoop.") else raw_key
        value = str(value)
        if key.startswith("tablesvc.storage."):
            out[key] = value
        elif key.startswith("fs.s3a."):
            if key in _S3A_KEYS:
                out[_S3A_KEYS[key]] = value
                if key == "fs.s3a.endpoint" and value.lower().startswith("http://"):
                    ssl_off = True      # S3A takes the endpoint's scheme as given
            elif key == "fs.s3a.path.style.access":
                # only "true" is mapped: object_store's virtual-hosted mode takes an explicit endpoint as the
                # bucket's own URL (dropping the bucket name); its default (path style) is right for AWS and moto
                if value.lower() == "true":
                    out["virtual_hosted_style_request"] = "false"
            elif key == "fs.s3a.connection.ssl.enabled":
                ssl_off = ssl_off or value.lower() == "false"
        elif "." not in key:
            low = key.lower()
            low = _S3_ALIASES.get(low, low)
            if low.startswith("aws_") and low[4:] in _CLIENT_KEYS:
                low = low[4:]
            out[low] = value
    if ssl_off:
        out.setdefault("allow_http", "true")
        if "endpoint" in out and "://" not in out["endpoint"]:
            out["endpoint"] = "http://" + out["endpoint"]
    elif "endpoint" in out and "://" not in out["endpoint"]:
        out["endpoint"] = "https://" + out["endpoint"]  # S3A endpoints are often given without a scheme
    return out


@dataclass(frozen=True)
class ObjectStoreSpec:
    """What a client is built from: the store family, bucket (or container), and options."""

    family: str
    bucket: str
    options: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ObjectPath:
    url: str
    scheme: str
    bucket: str
    key: str
    account: str | None = None


def parse_url(url: str) -> ObjectPath:
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in SCHEMES:
        raise StorageError(f"{url}: not an object-store URL (schemes: {', '.join(sorted(SCHEMES))})")
    bucket, _, key = rest.partition("/")
    account = None
    if scheme in ("abfs", "abfss") and "@" in bucket:  # abfss://container@account.dfs.core.windows.net/key
        bucket, _, host = bucket.partition("@")
        account = host.split(".", 1)[0]
    if not bucket:
        raise StorageError(f"{url}: no bucket in the URL")
    return ObjectPath(url, scheme, bucket, key.strip("/"), account)


# -- per-process clients ---------------------------------------------------------------------------
_clients: dict[tuple[ObjectStoreSpec, int], object] = {}
_clients_lock = threading.Lock()
_used_in_pid: int | None = None  # the process that first used obstore (its runtime does not survive fork)


def _after_fork_in_child() -> None:
    global _clients_lock
    _clients.clear()
    _clients_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


_ALLOW_HTTP_ENV = {"s3": "AWS_ALLOW_HTTP", "azure": "AZURE_ALLOW_HTTP", "gcs": "GOOGLE_ALLOW_HTTP"}
# object_store takes an Azure account under either name, but refuses both at once
_AZURE_ACCOUNT_KEYS = ("account_name", "azure_storage_account_name")


def _build_store(spec: ObjectStoreSpec):
    from obstore.store import AzureStore, GCSStore, S3Store

    config = dict(spec.options)
    client_options: dict[str, object] = {}
    retry: dict[str, object] = {}
    for key in list(config):
        if key in _CLIENT_KEYS:
            value = config.pop(key)
            client_options[key] = value.lower() == "true" if key.startswith("allow_") or key.startswith("http") \
                else value
        elif key == RETRY_TIMEOUT_KEY:
            retry["retry_timeout"] = timedelta(milliseconds=int(config.pop(key)))
        elif key == MAX_RETRIES_KEY:
            retry["max_retries"] = int(config.pop(key))
        elif key.startswith("tablesvc."):
            config.pop(key)
    # Client options given to obstore replace those it would take from the environment, so a lock
    # client with a call bound (``with_call_bound``) would lose an http endpoint allowed by the
    # environment alone (emulators: moto, Azurite).  Only then: a client given no options keeps all
    # of the environment's (proxy, timeouts), which passing allow_http alone would drop.
    allow_http_env = _ALLOW_HTTP_ENV.get(spec.family)
    if (allow_http_env and (client_options or spec.family == "s3") and "allow_http" not in client_options
            and os.environ.get(allow_http_env, "").lower() == "true"):
        client_options["allow_http"] = True
    kwargs = {"client_options": client_options or None, "retry_config": retry or None}
    if spec.family == "s3":
        return S3Store(spec.bucket, config=config or None, **kwargs)
    if spec.family == "gcs":
        return GCSStore(spec.bucket, config=config or None, **kwargs)
    return AzureStore(spec.bucket, config=config or None, **kwargs)


# The token a compare-and-swap is made against.  S3 and Azure compare the ETag (``If-Match``); GCS
# compares the object's generation (``x-goog-if-generation-match``), which obstore calls ``version``
# and without which its GCS client refuses a conditional update before sending anything.
_VERSION_FIELD = {scheme: ("version" if family == "gcs" else "e_tag") for scheme, family in SCHEMES.items()}


def _version_token(scheme: str, meta: Mapping[str, object]) -> str | None:
    """The version token of an object's metadata (a GET's ``meta`` or a PUT's result)."""
    value = meta.get(_VERSION_FIELD[scheme])
    return str(value) if value else None


def update_mode(scheme: str, version: str) -> dict[str, str]:
    """obstore's ``UpdateVersion`` for a conditional update of an object at ``version``."""
    return {_VERSION_FIELD[scheme]: version}


def _client(spec: ObjectStoreSpec, where: str):
    global _used_in_pid
    pid = os.getpid()
    if _used_in_pid is not None and _used_in_pid != pid:
        raise StorageError(f"{where}: this process was forked after its parent used the object store, whose "
                           "client does not survive fork; start workers with 'spawn' or as subprocesses")
    with _clients_lock:
        store = _clients.get((spec, pid))
        if store is None:
            try:
                store = _build_store(spec)
            except Exception as e:
                raise StorageError(f"{where}: cannot build the {spec.family} client for bucket "
                                   f"{spec.bucket}: {_first_line(e)}") from None
            _clients[(spec, pid)] = store
        _used_in_pid = _used_in_pid or pid
    return store


def _travelling_storage(options: dict[str, str]) -> "ObjectStorage":
    return ObjectStorage(options, credentials_travel=True)


_ENDPOINT_URL = re.compile(r"\s*https?://\S+")
_DEBUG_MARK = "Debug source:"
_OS_MESSAGE = re.compile(r'message: "([^"]+)"')
_MAX_REASON = 300


def _first_line(e: BaseException) -> str:
    """obstore's message on one line, short: the endpoint URL it repeats is dropped (the caller names
    the object's own URL) and a long message keeps its head and its tail, where the reason is
    (``503 Service Unavailable``, ``error sending request``)."""
    # obstore appends the Rust error's debug dump ("Debug source: Generic { ... }"): dozens of lines of
    # structure whose one useful part is the innermost OS message ("Connection refused")
    summary, _, debug = str(e).partition(_DEBUG_MARK)
    lines = [line.strip() for line in summary.strip().splitlines() if line.strip()]
    text = _ENDPOINT_URL.sub("", " ".join(lines)) if lines else type(e).__name__
    causes = _OS_MESSAGE.findall(debug)
    if causes and causes[-1] not in text:
        text = f"{text} ({causes[-1]})"
    if len(text) > _MAX_REASON:
        text = text[:_MAX_REASON // 2] + " … " + text[-(_MAX_REASON // 2):]
    return text


def _mapped(e: BaseException, op: str, url: str) -> BaseException:
    """obstore's error for ``op`` on ``url`` as the project's: ``FileNotFoundError``/``FileExistsError``
    like local files, else a one-line ``StorageError``."""
    from obstore import exceptions as ox

    if isinstance(e, (FileNotFoundError, ox.NotFoundError)):
        return FileNotFoundError(errno.ENOENT, f"{op}: no such object", url)
    if isinstance(e, ox.AlreadyExistsError):
        return FileExistsError(errno.EEXIST, f"{op}: object already exists", url)
    return StorageError(f"{op} {url}: {type(e).__name__}: {_first_line(e)}")


# Objects up to this size are read whole, by one GET: a parquet reader touches most of such a file
# anyway (the merge reads every column; Hudi's footers, with their bloom filter, are often most of a
# small file), and each request costs an object store's first-byte latency (tens of ms on S3), in
# the order of what a few MiB take to arrive, so ranged reads of such a file would cost more
# requests and no less time.  The GET asks for the object's last WHOLE_READ_MAX bytes (a
# suffix range), which is the whole object when it is no larger: no HEAD is needed to learn the size.
# A larger object keeps that tail in memory (the parquet footer and the last column chunks are in
# it) and reads the rest by ranged GETs; an open file thus holds at most WHOLE_READ_MAX bytes.
WHOLE_READ_MAX = 8 << 20
# Stores asked for a suffix range.  Azure is not (its support of one varies): there a HEAD gives the
# size first, then the same rule applies.
_SUFFIX_RANGE_FAMILIES = {"s3", "gcs"}


def _refused_range(e: BaseException, key: str) -> bool:
    text = str(e).replace(key, "").lower()      # not the key's own words
    return "416" in text or "range" in text or "partial" in text


class _RangedObjectReader(io.RawIOBase):
    """A seekable binary file over one object, which pyarrow reads: the object's last bytes held in
    memory (``tail``), any other bytes fetched by one ranged GET per ``read`` of exactly the bytes
    asked for (pyarrow reads a buffer's worth at a time), so nothing is buffered twice."""

    def __init__(self, store, key: str, url: str, size: int, tail: bytes):
        self._store = store
        self._key = key
        self._url = url
        self._size = size
        self._tail = tail
        self._tail_start = size - len(tail)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    @property
    def size(self) -> int:
        return self._size

    def _fetch(self, start: int, end: int) -> bytes:
        import obstore

        try:
            return bytes(obstore.get_range(self._store, self._key, start=start, end=end))
        except Exception as e:
            raise _mapped(e, "read", self._url) from None

    def read(self, size: int = -1) -> bytes:
        start = min(self._pos, self._size)
        end = self._size if size is None or size < 0 else min(self._size, start + size)
        if start >= end:
            return b""
        if start >= self._tail_start:
            data = self._tail[start - self._tail_start:end - self._tail_start]
        elif end <= self._tail_start:
            data = self._fetch(start, end)
        else:
            data = self._fetch(start, self._tail_start) + self._tail[:end - self._tail_start]
        self._pos = start + len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[:len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise OSError(errno.EINVAL, "seek before the start of the object", self._url)
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos


class ObjectStorage:
    """``timeline.storage.Storage`` over an object store; paths are ``scheme://bucket/key`` URLs.

    ``options`` are object-store settings (``normalize_options``: obstore's key names, Hadoop S3A's,
    ``tablesvc.storage.*``); everything not given comes from the environment (``AWS_*``,
    ``GOOGLE_*``, ``AZURE_*``), which obstore reads itself.  Pickling keeps only the options that
    are no credential: a process that unpickles it takes its credentials from its own environment.
    """

    # A LIST answers each object's size too (``fsview.sizes`` lists a folder instead of a HEAD per file).
    listing_gives_sizes = True

    def __init__(self, options: Mapping[str, str] | None = None, *, credentials_travel: bool = False):
        self._options = tuple(sorted(normalize_options(options).items()))
        self._credentials_travel = credentials_travel

    def __reduce__(self):
        if self._credentials_travel:
            return (_travelling_storage, (dict(self._options),))
        return (ObjectStorage, ({k: v for k, v in self._options if not _is_secret(k)},))

    def for_tasks(self) -> "ObjectStorage":
        """This store as Spark tasks get it: pickled with all of its options, credentials given as
        options included, the way Spark ships ``spark.hadoop.fs.s3a.*`` keys to its executors.  A
        store configured from the environment carries no credential: each executor's Python then
        takes its own (``AWS_*``, an instance role, ``spark.executorEnv.*``; docs/storage.md)."""
        return ObjectStorage(dict(self._options), credentials_travel=True)

    def __repr__(self) -> str:
        return f"ObjectStorage({[k for k, _ in self._options]})"

    # -- plumbing -----------------------------------------------------------------------------
    def _locate(self, url: str, op: str):
        target = parse_url(url)
        family = SCHEMES[target.scheme]
        options = self._options
        if target.account and not any(k in dict(options) for k in _AZURE_ACCOUNT_KEYS):
            options = tuple(sorted(options + (("account_name", target.account),)))
        spec = ObjectStoreSpec(family, target.bucket, options)
        return _client(spec, f"{op} {url}"), target

    # -- reads ------------------------------------------------------------------------------------
    def read_bytes(self, path: str) -> bytes:
        import obstore

        store, target = self._locate(path, "read")
        try:
            return bytes(obstore.get(store, target.key).bytes())
        except Exception as e:
            raise _mapped(e, "read", path) from None

    def open_read(self, path: str) -> BinaryIO:
        """The object as a seekable binary file: read whole by one GET up to ``WHOLE_READ_MAX`` bytes
        (a ``BytesIO``), else its tail by that GET and the rest by ranged GETs (``_RangedObjectReader``)."""
        import obstore

        store, target = self._locate(path, "open")
        result = None
        if SCHEMES[target.scheme] in _SUFFIX_RANGE_FAMILIES:
            try:
                result = obstore.get(store, target.key, options={"range": {"suffix": WHOLE_READ_MAX}})
            except Exception as e:
                # An empty object has no suffix to give: S3 answers 416 InvalidRange, moto a 200 that
                # object_store refuses as "not partial".  Its size is asked for then; any other
                # failure (retries exhausted, access denied, absent) is the open's.
                if not _refused_range(e, target.key):
                    raise _mapped(e, "open", path) from None
        try:
            if result is None:
                size = int(obstore.head(store, target.key)["size"])
                if size == 0:
                    return io.BytesIO(b"")
                result = obstore.get(store, target.key, options={"range": {"offset": size - WHOLE_READ_MAX}}
                                     if size > WHOLE_READ_MAX else None)
            size = int(result.meta["size"])
            tail = bytes(result.bytes())
        except Exception as e:
            raise _mapped(e, "open", path) from None
        if len(tail) == size:
            return io.BytesIO(tail)
        return _RangedObjectReader(store, target.key, path, size, tail)

    # -- writes -----------------------------------------------------------------------------------
    def _create(self, path: str, body, op: str) -> None:
        import obstore
        from obstore import exceptions as ox

        store, target = self._locate(path, op)
        token = uuid.uuid4().hex
        for attempt in range(_CREATE_ATTEMPTS):
            try:
                obstore.put(store, target.key, body, mode="create", use_multipart=False,
                            attributes={WRITER_ATTRIBUTE: token})
                return
            except ox.AlreadyExistsError as e:
                lost = e
            except Exception as e:
                raise _mapped(e, op, path) from None
            # 412: someone's object is there; ours if a retried PUT of ours had in fact succeeded.
            try:
                attributes = obstore.get(store, target.key).attributes
            except Exception as e:
                if not isinstance(e, (FileNotFoundError, ox.NotFoundError)):
                    raise _mapped(e, op, path) from None
                # No object at all: S3's 409 ConditionalRequestConflict (another conditional write
                # to the key was in flight), which object_store reports as "already exists".  Ask
                # again once that write has settled: it either shows (412: lost) or failed (ours).
                time.sleep(_CREATE_CONFLICT_BACKOFF_S * (attempt + 1))
                continue
            if attributes.get(WRITER_ATTRIBUTE) == token:
                return
            raise _mapped(lost, op, path) from None     # another writer's object: a lost race
        # Never an object, only conflicts: a conditional write of the key (perhaps our own first PUT,
        # which obstore retried) is still in flight and may yet land, so the outcome is unknown,
        # not lost (``StorageError``: a caller must not undo what depends on it).
        raise StorageError(f"{op} {path}: conditional writes of the key kept conflicting (409) and no object "
                           f"is there yet after {_CREATE_ATTEMPTS} attempts: outcome unknown")

    def write_new(self, path: str, data: bytes) -> None:
        self._create(path, bytes(data), "create")

    def write_new_from(self, path: str, write: Callable[[BinaryIO], None]) -> int:
        """The content is spooled (memory up to 64 MiB, then a temporary file under ``TMPDIR``) and
        sent as one conditional PUT, which holds the whole body in memory while it is sent; if
        ``write`` raises, nothing was sent."""
        with tempfile.SpooledTemporaryFile(max_size=64 << 20) as spool:
            write(spool)
            size = spool.tell()
            spool.seek(0)
            self._create(path, spool.read(), "create")  # a conditional PUT is one request: whole body
        return size

    def write_replace(self, path: str, data: bytes) -> None:
        import obstore

        store, target = self._locate(path, "replace")
        try:
            obstore.put(store, target.key, bytes(data), mode="overwrite", use_multipart=False)
        except Exception as e:
            raise _mapped(e, "replace", path) from None

    # -- conditional updates (the storage-based table lock, timeline/storage_lock.py) -------------------
    def read_versioned(self, path: str) -> tuple[bytes, str]:
        """The body and its ETag, from one GET (the ETag is that of the body returned)."""
        import obstore

        store, target = self._locate(path, "read")
        try:
            result = obstore.get(store, target.key)
            body = bytes(result.bytes())
            version = _version_token(target.scheme, result.meta)
        except Exception as e:
            raise _mapped(e, "read", path) from None
        if not version:
            raise StorageError(f"read {path}: the object store returned no {_VERSION_FIELD[target.scheme]}, "
                               "which conditional updates need")
        return body, version

    def write_if(self, path: str, data: bytes, expected_version: str | None) -> str:
        """One single-part PUT with ``If-None-Match: *`` (``expected_version`` None) or ``If-Match:
        <ETag>``, carrying a per-write token in user metadata.  A 412 (or S3's 404 for If-Match on a
        missing key) is ``VersionConflictError`` unless the object there carries our token (a retried
        PUT of ours that had succeeded).  Returns the new ETag."""
        import obstore
        from obstore import exceptions as ox

        store, target = self._locate(path, "conditional write")
        token = uuid.uuid4().hex
        mode = "create" if expected_version is None else update_mode(target.scheme, expected_version)
        try:
            result = obstore.put(store, target.key, bytes(data), mode=mode, use_multipart=False,
                                 attributes={WRITER_ATTRIBUTE: token})
            return self._required_version(target.scheme, result, path)
        except StorageError:
            raise
        except (ox.AlreadyExistsError, ox.PreconditionError, FileNotFoundError, ox.NotFoundError):
            pass
        except Exception as e:
            raise _mapped(e, "conditional write", path) from None
        try:
            current = obstore.get(store, target.key)
            recognised = current.attributes.get(WRITER_ATTRIBUTE) == token
        except Exception:
            recognised = False
        if recognised:
            return self._required_version(target.scheme, current.meta, path)
        expected = "absent" if expected_version is None else f"at version {expected_version}"
        raise VersionConflictError(f"conditional write {path}: lost, the object is no longer {expected} "
                                   "(someone else wrote it first)")

    @staticmethod
    def _required_version(scheme: str, meta: Mapping[str, object], path: str) -> str:
        """The new version token of a conditional write; without one, the next update of the lock
        would go out as a create and fail as a lost race, so its absence is an error of its own."""
        version = _version_token(scheme, meta)
        if not version:
            raise StorageError(f"conditional write {path}: the object store returned no "
                               f"{_VERSION_FIELD[scheme]}, which the next conditional update needs")
        return version

    def discard_partial(self, folder: str, names: Iterable[str]) -> list[str]:
        """Nothing: every object is written by a single PUT, which leaves nothing when it fails."""
        return []

    # -- listing ------------------------------------------------------------------------------------
    def _list_with_delimiter(self, path: str, op: str):
        import obstore

        store, target = self._locate(path, op)
        try:
            result = obstore.list_with_delimiter(store, target.key or None)
        except Exception as e:
            raise _mapped(e, op, path) from None
        return target, result

    def list_dir(self, path: str) -> list[FileInfo]:
        target, result = self._list_with_delimiter(path, "list")
        base = path.rstrip("/")
        out = [FileInfo(p.rsplit("/", 1)[-1], f"{base}/{p.rsplit('/', 1)[-1]}", 0, 0, True)
               for p in result["common_prefixes"]]
        for meta in self._files(target, result):
            name = meta["path"].rsplit("/", 1)[-1]
            out.append(FileInfo(name, f"{base}/{name}", int(meta["size"]),
                                int(meta["last_modified"].timestamp() * 1000), False))
        out.sort(key=lambda f: f.name)
        return out

    def list_names(self, path: str) -> list[str]:
        target, result = self._list_with_delimiter(path, "list")
        return sorted(meta["path"].rsplit("/", 1)[-1] for meta in self._files(target, result))

    @staticmethod
    def _files(target: ObjectPath, result) -> list:
        """The listed objects that are files: object_store reports a directory marker ``a/b/`` (as S3A's
        mkdirs writes) as ``a/b``, so the listed folder's own marker and sub-folder markers are left out."""
        own = target.key.rstrip("/")
        folders = set(result["common_prefixes"])
        return [meta for meta in result["objects"] if meta["path"] != own and meta["path"] not in folders]

    def _is_prefix(self, store, key: str, url: str, op: str) -> bool:
        import obstore

        try:
            for batch in obstore.list(store, key or None, chunk_size=1):
                return len(batch) > 0
        except Exception as e:
            raise _mapped(e, op, url) from None
        return False

    def stat(self, path: str) -> FileInfo:
        import obstore

        store, target = self._locate(path, "stat")
        name = target.key.rsplit("/", 1)[-1]
        if not target.key:  # the bucket itself: a folder when it holds anything
            if self._is_prefix(store, "", path, "stat"):
                return FileInfo(target.bucket, path, 0, 0, True)
            raise FileNotFoundError(errno.ENOENT, "stat: empty bucket", path)
        try:
            meta = obstore.head(store, target.key)
        except Exception as e:
            mapped = _mapped(e, "stat", path)
            if isinstance(mapped, FileNotFoundError) and self._is_prefix(store, target.key, path, "stat"):
                return FileInfo(name, path, 0, 0, True)
            raise mapped from None
        return FileInfo(name, path, int(meta["size"]), int(meta["last_modified"].timestamp() * 1000), False)

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return False

    # -- deletes ------------------------------------------------------------------------------------
    def delete(self, path: str) -> bool:
        import obstore

        store, target = self._locate(path, "delete")
        # S3's DELETE answers 204 for a missing key too: the HEAD tells whether there was one
        for call in (obstore.head, obstore.delete):
            try:
                call(store, target.key)
            except Exception as e:
                mapped = _mapped(e, "delete", path)
                if isinstance(mapped, FileNotFoundError):
                    return False
                raise mapped from None
        return True

    def delete_tree(self, path: str) -> None:
        import obstore

        store, target = self._locate(path, "delete tree")
        if not target.key:
            raise StorageError(f"delete tree {path}: refusing to delete a whole bucket")
        try:
            keys = [meta["path"] for batch in obstore.list(store, target.key, chunk_size=1000) for meta in batch]
            if keys:
                obstore.delete(store, keys)
        except Exception as e:
            raise _mapped(e, "delete tree", path) from None

    def makedirs(self, path: str) -> None:
        """Nothing: object stores have no folders (a folder is a key prefix)."""

    def with_call_bound(self, bound_ms: int) -> "ObjectStorage":
        """The same store with each call bounded to about ``bound_ms``: obstore's per-request
        ``timeout`` and its ``tablesvc.storage.retry.timeout.ms`` (both 30 s / 180 s by default) set
        to it unless already shorter.  The storage-based table lock uses it, as Java caps each lock
        call at a fifth of the validity, so no lock call outlasts the lock (a separate client)."""
        options = dict(self._options)
        retry = options.get(RETRY_TIMEOUT_KEY)
        if retry is None or int(retry) > bound_ms:
            options[RETRY_TIMEOUT_KEY] = str(bound_ms)
        if "timeout" not in options:          # a user's own timeout (a duration string) is kept
            options["timeout"] = f"{bound_ms}ms"
        return ObjectStorage(options)
