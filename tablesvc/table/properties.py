"""``hoodie.properties``: Java properties syntax, checksum, and the safe-update protocol.

Reading follows ``java.util.Properties.load`` (comments, ``=``/``:``/space separators,
backslash escapes, ``\\uXXXX``, line continuations).  Writing follows
``Properties.store`` escaping, which hudi-rs also accepts because it only ever
unescapes ``\\:`` (in the schema value) and our other values never need escaping.

Update protocol (as Hudi's own): write ``hoodie.properties.backup`` with the old
content, atomically replace the main file, re-read and verify the checksum, then
delete the backup.  A reader that finds the main file missing or failing its
checksum falls back to the backup.
"""

from __future__ import annotations

import zlib
from datetime import datetime, timezone

from tablesvc.errors import NotATableError, TableConfigError
from timeline.storage import Storage, join

PROPS_FILE = ".hoodie/hoodie.properties"
BACKUP_FILE = ".hoodie/hoodie.properties.backup"
CHECKSUM_KEY = "hoodie.table.checksum"


def table_checksum(props: dict[str, str]) -> int:
    """CRC32 of ``<database>.<table>`` (Java ``HoodieTableConfig.generateChecksum``)."""
    name = props.get("hoodie.table.name", "")
    db = props.get("hoodie.database.name", "")
    return zlib.crc32(f"{db}.{name}".encode("utf-8")) & 0xFFFFFFFF


def _logical_lines(text: str):
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        # A line ending in an odd number of backslashes continues on the next line.
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1 and i <= len(lines):
            line = line[:-1] + (lines[i].lstrip(" \t\f") if i < len(lines) else "")
            i += 1
        yield line


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 >= len(text):
            out.append(c)
            i += 1
            continue
        n = text[i + 1]
        if n == "u" and i + 6 <= len(text):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(n, n))
        i += 2
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key_end, i = len(line), 0
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                key_end = i
                break
            i += 1
        key = line[:key_end]
        rest = line[key_end:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape(key)] = _unescape(rest)
    return props


def _escape(text: str, is_key: bool) -> str:
    out = []
    for idx, c in enumerate(text):
        if c == " " and (is_key or idx == 0):
            out.append("\\ ")
        elif c in "\\=:#!":
            out.append("\\" + c)
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return "".join(out)


def render_properties(props: dict[str, str], now: datetime | None = None) -> str:
    """Java ``Properties.store`` style; the checksum is (re)computed and written last."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    body = {k: v for k, v in props.items() if k != CHECKSUM_KEY}
    body[CHECKSUM_KEY] = str(table_checksum(body))
    lines = [f"#Updated at {stamp}"]
    lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"


def _verified(props: dict[str, str]) -> bool:
    stored = props.get(CHECKSUM_KEY)
    return stored is None or stored.strip() == str(table_checksum(props))


def read_properties(storage: Storage, base_path: str) -> dict[str, str]:
    """The table's properties; falls back to the backup when the main file is missing or bad."""
    main, backup = join(base_path, PROPS_FILE), join(base_path, BACKUP_FILE)
    problems = []
    for path in (main, backup):
        try:
            text = storage.read_bytes(path).decode("utf-8")
        except FileNotFoundError:
            problems.append(f"{path} is missing")
            continue
        except (NotADirectoryError, IsADirectoryError):
            problems.append(f"{path} is not a file in a folder")
            continue
        except UnicodeDecodeError:
            problems.append(f"{path} is not UTF-8 text")
            continue
        props = parse_properties(text)
        if not props.get("hoodie.table.name") and not props.get("hoodie.table.version"):
            problems.append(f"{path} holds no table properties")
            continue
        if not _verified(props):
            problems.append(f"{path}: {CHECKSUM_KEY} does not match the table name")
            continue
        return props
    if not storage.exists(join(base_path, ".hoodie")):
        raise NotATableError(f"{base_path} is not a Hudi table (no .hoodie folder)")
    if problems[0].endswith("is missing") and problems[1].endswith("is missing"):
        raise NotATableError(f"{base_path} is not a Hudi table ({main} is missing)")
    raise TableConfigError(f"cannot read table properties: {problems[0]}")


def write_properties(storage: Storage, base_path: str, props: dict[str, str], *, create: bool = False) -> None:
    """Create (exclusively) or safely update ``hoodie.properties``."""
    main, backup = join(base_path, PROPS_FILE), join(base_path, BACKUP_FILE)
    data = render_properties(props).encode("utf-8")
    if create:
        try:
            storage.write_new(main, data)
        except FileExistsError:
            raise TableConfigError(f"{base_path} is already a Hudi table ({main} exists)") from None
        return
    old = storage.read_bytes(main)
    storage.write_replace(backup, old)
    storage.write_replace(main, data)
    if not _verified(parse_properties(storage.read_bytes(main).decode("utf-8"))):
        raise TableConfigError(f"{main}: checksum did not verify after the update; the backup is kept")
    storage.delete(backup)
