"""How cost grows, drawn: an SVG of the growth series a benchmark report holds.

The scaling cases (``test_bench_scaling.py``) record three points of read and compaction time
along rows, file groups and log blocks per slice; the planning cases (``test_bench_planning.py``)
record compaction and clean planning on three timelines (100, ~1k and 10k delta commits at scale 1).  Each
series becomes one panel with logarithmic axes, a decade as long on the y axis as on the x axis:
a line drawn at slope k is cost ~ x^k, in every panel, so slopes compare across panels.

Written by the harness beside the report (``bench-out/growth.svg``) and by hand for the docs::

    python tests/benchmarks/growth_plot.py bench-out/report.json docs/performance-growth.svg

Plain SVG text (no plotting library: the project's dependencies stay as they are).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from html import escape
from pathlib import Path


@dataclass(frozen=True)
class Line:
    label: str
    colour: str
    points: tuple[tuple[float, float], ...]    # (x, seconds), x ascending


@dataclass(frozen=True)
class Panel:
    x_label: str                  # what the series varies, and what it holds fixed
    lines: tuple[Line, ...]


_READ_COLOUR, _COMPACT_COLOUR, _CLEAN_COLOUR = "#1f77b4", "#d62728", "#2ca02c"
_PLANNING = (("planning: compaction plan", "compaction planning", _COMPACT_COLOUR),
             ("planning: clean plan", "clean planning", _CLEAN_COLOUR))


def _line(label: str, colour: str, points) -> Line | None:
    """The line through the points that can be drawn on log axes (both values > 0); None when
    fewer than two different x remain (a time rounded to 0 or missing; a tiny scale where every
    point has the same number of rows)."""
    kept = tuple((x, y) for x, y in points if x and y and x > 0 and y > 0)
    return Line(label, colour, kept) if len({x for x, _ in kept}) >= 2 else None


def _scaling_panel(case: dict | None, x_label: str, rows_as_x: bool = False) -> Panel | None:
    points = (case or {}).get("extra", {}).get("points") or []
    xs = [p["rows"] if rows_as_x else p["x"] for p in points]   # rows: the size measured, at any scale
    lines = tuple(line for line in (
        _line("snapshot read", _READ_COLOUR, zip(xs, (p.get("read_s") for p in points))),
        _line("compaction", _COMPACT_COLOUR, zip(xs, (p.get("compaction_s") for p in points)))) if line)
    return Panel(x_label.format(rows=_number(points[0]["rows"])) if points else x_label, lines) if lines else None


def panels_of(cases: list[dict]) -> tuple[list[Panel], list[str]]:
    """The panels a report's cases hold data for, and notes on what could not be drawn."""
    by_name = {c["case"]: c for c in cases}
    panels = [_scaling_panel(by_name.get("scaling: cost vs rows"), "rows (20 file groups)", rows_as_x=True),
              _scaling_panel(by_name.get("scaling: cost vs file groups"), "file groups ({rows} rows)"),
              _scaling_panel(by_name.get("scaling: cost vs log blocks per slice"),
                             "log blocks per slice ({rows} rows, 20 groups)")]
    notes, lines = [], []
    for prefix, label, colour in _PLANNING:
        case = next((c for name, c in by_name.items() if name.startswith(prefix)), None)
        extra = (case or {}).get("extra", {})
        if case is None or "small_files" not in extra:
            continue
        if extra.get("capped"):   # a lower bound only: not a point of the line
            notes.append(f"{label} on the large timeline stopped at its {extra.get('cap_s')} s cap, not drawn")
            continue
        line = _line(label, colour, ((extra["small_files"], extra.get("small_s")),
                                     (extra["mid_files"], extra.get("mid_s")), (case["rows"], case["tablesvc_s"])))
        if line:
            lines.append(line)
    if lines:
        panels.append(Panel("data files on the timeline (three timelines)", tuple(lines)))
    return [p for p in panels if p], notes


# -- drawing -----------------------------------------------------------------------------------------
_W, _H = 300, 250                    # one panel
_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 14, 44, 46
_MANTISSAS = ((1,), (1, 2, 5), (1, 2, 3, 4, 5, 6, 8), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9))


def _ticks(lo: float, hi: float) -> list[float]:
    """Round values between lo and hi to label a log axis: powers of ten, or finer steps until
    at least three fall inside (a short axis)."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    ticks: list[float] = []
    for mantissas in _MANTISSAS:
        ticks = [m * 10 ** e for e in range(first, last + 1) for m in mantissas if lo <= m * 10 ** e <= hi]
        if len(ticks) >= 3:
            break
    return ticks[:: max(1, len(ticks) // 8)]


def _number(v: float) -> str:
    if v >= 1_000_000:
        return f"{v / 1_000_000:g}M"
    if v >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:.3g}"


def _log_range(values: list[float], decades: float) -> tuple[float, float]:
    """A range ``decades`` long (log10) centred on ``values``."""
    middle = (math.log10(min(values)) + math.log10(max(values))) / 2
    return 10 ** (middle - decades / 2), 10 ** (middle + decades / 2)


def _panel(p: Panel, dx: int) -> list[str]:
    pw, ph = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    xs = [x for line in p.lines for x, _ in line.points]
    ys = [y for line in p.lines for _, y in line.points]
    x_span = max(math.log10(max(xs) / min(xs)), 0.3) * 1.15      # decades shown, with a margin
    y_span = max(math.log10(max(ys) / min(ys)), 0.3) * 1.15
    per_decade = min(pw / x_span, ph / y_span)                   # one scale for both axes: slope = k
    (x0, _), (y0, _) = _log_range(xs, pw / per_decade), _log_range(ys, ph / per_decade)

    def px(x: float) -> float:
        return dx + _LEFT + per_decade * (math.log10(x) - math.log10(x0))

    def py(y: float) -> float:
        return _TOP + ph - per_decade * (math.log10(y) - math.log10(y0))

    x1, y1 = 10 ** (math.log10(x0) + pw / per_decade), 10 ** (math.log10(y0) + ph / per_decade)
    out = [f'<g class="panel" data-x-label="{escape(p.x_label)}">',
           f'<rect x="{dx + _LEFT}" y="{_TOP}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>']
    for t in _ticks(x0, x1):
        out.append(f'<text x="{px(t):.1f}" y="{_TOP + ph + 14}" text-anchor="middle">{_number(t)}</text>')
    for t in _ticks(y0, y1):
        out.append(f'<line x1="{dx + _LEFT}" x2="{dx + _LEFT + pw}" y1="{py(t):.1f}" y2="{py(t):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{dx + _LEFT - 4}" y="{py(t) + 4:.1f}" text-anchor="end">{_number(t)}</text>')
    out.append(f'<text x="{dx + _LEFT + pw / 2:.1f}" y="{_H - 14}" text-anchor="middle">{escape(p.x_label)}</text>')
    for row, line in enumerate(p.lines):
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in line.points)
        out.append(f'<polyline class="series" data-label="{escape(line.label)}" points="{pts}" fill="none" '
                   f'stroke="{line.colour}" stroke-width="2"/>')
        out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{line.colour}"><title>'
                f'{escape(line.label)}: {_number(x)} -> {y:.3g} s</title></circle>' for x, y in line.points]
        out.append(f'<text x="{dx + _LEFT}" y="{12 + 14 * row}" fill="{line.colour}">'
                   f'{escape(line.label)} (k = {exponent(line):.2f})</text>')
    out.append("</g>")
    return out


def exponent(line: Line) -> float:
    """k of cost ~ x^k from the line's first point to its last (the slope drawn)."""
    (xa, ya), (xb, yb) = line.points[0], line.points[-1]
    return math.log(yb / ya) / math.log(xb / xa) if xb != xa else float("nan")


def render_svg(panels: list[Panel], caption: str = "") -> str:
    """One row of panels; seconds (log) against the panel's x (log)."""
    width = _W * len(panels)
    body = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{_H + 20}" '
            f'viewBox="0 0 {width} {_H + 20}" font-family="sans-serif" font-size="11">',
            '<rect width="100%" height="100%" fill="white"/>']
    for i, p in enumerate(panels):
        body += _panel(p, i * _W)
    body.append(f'<text x="8" y="{_H + 12}" fill="#555">seconds against each series, both log scales, a decade '
                f'as long on both axes: k = slope, cost ~ x^k{escape(caption)}</text>')
    body.append("</svg>")
    return "\n".join(body) + "\n"


def write_growth_svg(cases: list[dict], path: Path, caption: str = "") -> bool:
    """Draw the report's growth series into ``path``; False when it has none (and no older
    drawing is left at ``path`` to be taken for this report's)."""
    panels, notes = panels_of(cases)
    if not panels:
        path.unlink(missing_ok=True)
        return False
    path.write_text(render_svg(panels, "".join(f"; {n}" for n in notes) + caption))
    return True


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: growth_plot.py REPORT.json OUT.svg", file=sys.stderr)
        return 2
    report = json.loads(Path(argv[0]).read_text())
    when = report.get("meta", {}).get("when", "")
    if not write_growth_svg(report["cases"], Path(argv[1]), f"; {when}" if when else ""):
        print(f"{argv[0]}: no scaling or planning cases to draw", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
