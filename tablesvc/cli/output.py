"""Rendering command results as aligned text tables or JSON."""

from __future__ import annotations

import json
import sys
from typing import Any, Sequence, TextIO


# Each function looks sys.stdout up when called (not at import), so callers can capture it.

def print_json(data: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    json.dump(data, out, indent=2, sort_keys=False, default=str)
    out.write("\n")


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], out: TextIO | None = None, *,
                names_as_they_are: bool = False) -> None:
    """Aligned columns under a header of upper-case labels; ``names_as_they_are``: the header
    shows the column names unchanged (table data, where ``isActive`` and ``ISACTIVE`` differ)."""
    out = out or sys.stdout

    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, (list, tuple)):
            return ",".join(str(x) for x in v) if v else "-"
        return str(v)

    table = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in table]) for i, c in enumerate(columns)]
    header = columns if names_as_they_are else [c.upper() for c in columns]
    out.write("  ".join(c.ljust(w) for c, w in zip(header, widths)).rstrip() + "\n")
    for row in table:
        out.write("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() + "\n")


def say(message: str, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(message + "\n")


def add_quiet_option(parser) -> None:
    """``--quiet`` for commands that run Spark jobs: no progress lines (``spark/progress.py``)."""
    parser.add_argument("--quiet", action="store_true",
                        help="print no progress lines on stderr (--json prints none either)")
