"""How cost grows, drawn: an SVG of the growth series a benchmark report holds.

The scaling cases (``test_bench_scaling.py``) record three points of read and compaction time
along rows, file groups and log blocks per slice; the planning cases (``test_bench_planning.py``)
record compaction and clean planning on three timelines (100, ~1k and 10k delta commits).  Each
series becomes one panel with logarithmic axes, so a straight line of slope k is cost ~ x^k and
the slopes of different panels compare directly.

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
    title: str
    x_label: str
    lines: tuple[Line, ...]


_READ, _COMPACT, _CLEAN = "#1f77b4", "#d62728", "#2ca02c"
_SCALING = (("scaling: cost vs rows", "rows (20 file groups)"),
            ("scaling: cost vs file groups", "file groups (500k rows)"),
            ("scaling: cost vs log blocks per slice", "log blocks per slice"))
_PLANNING = (("planning: compaction plan", "compaction planning", _COMPACT),
             ("planning: clean plan", "clean planning", _CLEAN))


def panels_of(cases: list[dict]) -> list[Panel]:
    """The panels a report's cases hold data for (none: an empty list)."""
    by_name = {c["case"]: c for c in cases}
    out = []
    for case, x_label in _SCALING:
        points = (by_name.get(case) or {}).get("extra", {}).get("points")
        if points:
            out.append(Panel(x_label, x_label, (
                Line("snapshot read", _READ, tuple((p["x"], p["read_s"]) for p in points)),
                Line("compaction", _COMPACT, tuple((p["x"], p["compaction_s"]) for p in points)))))
    lines = []
    for prefix, label, colour in _PLANNING:
        case = next((c for name, c in by_name.items() if name.startswith(prefix)), None)
        extra = (case or {}).get("extra", {})
        if case and "small_files" in extra and not extra.get("capped"):
            lines.append(Line(label, colour, ((extra["small_files"], case["baseline_s"]),
                                              (extra["mid_files"], extra["mid_s"]),
                                              (case["rows"], case["tablesvc_s"]))))
    if lines:
        out.append(Panel("data files on the timeline", "data files (100 / 1k / 10k delta commits)", tuple(lines)))
    return out


# -- drawing -----------------------------------------------------------------------------------------
W, H = 300, 240                    # one panel
LEFT, RIGHT, TOP, BOTTOM = 52, 14, 30, 46


def _decades(lo: float, hi: float) -> list[float]:
    """Powers of ten (and their 2x and 5x on an axis of two decades or less) from lo to hi."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1, 2, 5) if math.log10(hi / lo) <= 2 else (1,)   # a short axis gets 2x and 5x marks too
    return [m * 10 ** e for e in range(first, last + 1) for m in steps if lo <= m * 10 ** e <= hi]


def _span(values: list[float]) -> tuple[float, float]:
    """A logarithmic axis range around ``values`` with a little room on both sides."""
    lo, hi = min(values), max(values)
    if hi <= lo:
        lo, hi = lo / 2, hi * 2
    pad = (math.log10(hi) - math.log10(lo)) * 0.08
    return 10 ** (math.log10(lo) - pad), 10 ** (math.log10(hi) + pad)


def _number(v: float) -> str:
    if v >= 1000:
        return f"{v / 1000:g}k" if v < 1_000_000 else f"{v / 1_000_000:g}M"
    return f"{v:g}"


def _panel(p: Panel, dx: int) -> list[str]:
    xs = [x for line in p.lines for x, _ in line.points]
    ys = [y for line in p.lines for _, y in line.points]
    (x0, x1), (y0, y1) = _span(xs), _span(ys)
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(x: float) -> float:
        return dx + LEFT + pw * (math.log10(x) - math.log10(x0)) / (math.log10(x1) - math.log10(x0))

    def py(y: float) -> float:
        return TOP + ph * (1 - (math.log10(y) - math.log10(y0)) / (math.log10(y1) - math.log10(y0)))

    out = [f'<g class="panel" data-title="{escape(p.title)}">',
           f'<text x="{dx + W / 2:.1f}" y="16" text-anchor="middle" font-weight="bold">{escape(p.title)}</text>',
           f'<rect x="{dx + LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>']
    for t in _decades(x0, x1):
        out.append(f'<text x="{px(t):.1f}" y="{TOP + ph + 14}" text-anchor="middle">{_number(t)}</text>')
    for t in _decades(y0, y1):
        out.append(f'<line x1="{dx + LEFT}" x2="{dx + LEFT + pw}" y1="{py(t):.1f}" y2="{py(t):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{dx + LEFT - 4}" y="{py(t) + 4:.1f}" text-anchor="end">{_number(t)}</text>')
    out.append(f'<text x="{dx + LEFT + pw / 2:.1f}" y="{H - 12}" text-anchor="middle">{escape(p.x_label)}</text>')
    for k, line in enumerate(p.lines):
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in line.points)
        out.append(f'<polyline class="series" data-label="{escape(line.label)}" points="{pts}" fill="none" '
                   f'stroke="{line.colour}" stroke-width="2"/>')
        out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{line.colour}"><title>'
                f'{escape(line.label)}: {_number(x)} -> {y:.3g} s</title></circle>' for x, y in line.points]
        (xa, ya), (xb, yb) = line.points[0], line.points[-1]
        k_exp = math.log(yb / ya) / math.log(xb / xa) if xb > xa and ya > 0 and yb > 0 else float("nan")
        out.append(f'<text x="{dx + LEFT + 6}" y="{TOP + 14 + 14 * k}" fill="{line.colour}">'
                   f'{escape(line.label)} (k = {k_exp:.2f})</text>')
    out.append("</g>")
    return out


def render_svg(panels: list[Panel], caption: str = "") -> str:
    """One row of panels; seconds (log) against the panel's x (log)."""
    width = W * len(panels)
    body = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{H + 20}" '
            f'viewBox="0 0 {width} {H + 20}" font-family="sans-serif" font-size="11">',
            '<rect width="100%" height="100%" fill="white"/>']
    for i, p in enumerate(panels):
        body += _panel(p, i * W)
    body.append(f'<text x="8" y="{H + 12}" fill="#555">seconds (log scale) against the series (log scale); '
                f'k: slope, cost ~ x^k, first to last point{escape(caption)}</text>')
    body.append("</svg>")
    return "\n".join(body) + "\n"


def write_growth_svg(cases: list[dict], path: Path, caption: str = "") -> bool:
    """Draw the report's growth series into ``path``; False (nothing written) when it has none."""
    panels = panels_of(cases)
    if not panels:
        return False
    path.write_text(render_svg(panels, caption))
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
