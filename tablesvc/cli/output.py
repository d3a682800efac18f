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


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], out: TextIO | None = None) -> None:
    out = out or sys.stdout

    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, (list, tuple)):
            return ",".join(str(x) for x in v) if v else "-"
        return str(v)

    table = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in table]) for i, c in enumerate(columns)]
    out.write("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)).rstrip() + "\n")
    for row in table:
        out.write("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() + "\n")


def say(message: str, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(message + "\n")
