"""The benchmark report's growth plot (tests/benchmarks/growth_plot.py): which series it draws,
where their points land, and reports it cannot draw."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import pytest

from growth_plot import exponent, main, panels_of, render_svg, write_growth_svg

SVG = "{http://www.w3.org/2000/svg}"


def scaling(case: str, points: list[tuple[float, int, float | None, float | None]]) -> dict:
    return {"case": case, "rows": points[-1][1], "tablesvc_s": 1.0, "baseline_s": 1.0,
            "extra": {"points": [{"x": x, "rows": n, "read_s": r, "compaction_s": c} for x, n, r, c in points]}}


def planning(case: str, small: tuple[int, float], mid: tuple[int, float], big: tuple[int, float],
             capped: bool = False) -> dict:
    return {"case": case, "rows": big[0], "tablesvc_s": big[1], "baseline_s": small[1],
            "extra": {"small_files": small[0], "small_s": small[1], "mid_files": mid[0], "mid_s": mid[1],
                      "capped": capped, "cap_s": 10.0}}


CASES = [
    scaling("scaling: cost vs rows", [(250_000, 250_000, 0.48, 0.52), (500_000, 500_000, 0.70, 0.60),
                                      (1_000_000, 1_000_000, 0.94, 0.87)]),
    scaling("scaling: cost vs file groups", [(5, 500_000, 0.70, 0.63), (20, 500_000, 0.58, 0.76),
                                             (80, 500_000, 0.84, 1.30)]),
    scaling("scaling: cost vs log blocks per slice", [(1, 500_000, 0.61, 0.75), (4, 500_000, 0.68, 0.77),
                                                      (16, 500_000, 1.08, 1.17)]),
    planning("planning: compaction plan (build_plan, force)", (1_006, 0.01), (10_051, 0.077), (100_510, 1.015)),
    planning("planning: clean plan (plan_clean, KEEP_LATEST_COMMITS 10)", (1_006, 0.005), (10_051, 0.059),
             (100_510, 0.781)),
    {"case": "read: snapshot", "rows": 2_000_000, "tablesvc_s": 1.5, "baseline_s": 1.0, "extra": {}},
]


def polyline_xy(drawn) -> list[tuple[float, float]]:
    return [tuple(map(float, pair.split(","))) for pair in drawn.get("points").split()]


def test_each_series_becomes_a_panel_with_its_measured_points():
    panels, notes = panels_of(CASES)
    assert notes == []
    assert [p.x_label for p in panels] == ["rows (20 file groups)", "file groups (500k rows)",
                                           "log blocks per slice (500k rows, 20 groups)",
                                           "data files on the timeline (three timelines)"]
    assert [(line.label, line.points) for line in panels[1].lines] == [
        ("snapshot read", ((5, 0.70), (20, 0.58), (80, 0.84))), ("compaction", ((5, 0.63), (20, 0.76), (80, 1.30)))]
    assert [(line.label, line.points) for line in panels[3].lines] == [
        ("compaction planning", ((1_006, 0.01), (10_051, 0.077), (100_510, 1.015))),
        ("clean planning", ((1_006, 0.005), (10_051, 0.059), (100_510, 0.781)))]


def test_points_land_inside_their_panel_and_every_slope_drawn_is_its_exponent():
    panels, _ = panels_of(CASES)
    groups = ET.fromstring(render_svg(panels)).findall(f"{SVG}g")
    assert len(groups) == 4
    for group, panel in zip(groups, panels):
        box = group.find(f"{SVG}rect")
        left, top = float(box.get("x")), float(box.get("y"))
        right, bottom = left + float(box.get("width")), top + float(box.get("height"))
        lines = group.findall(f"{SVG}polyline")
        assert [p.get("data-label") for p in lines] == [line.label for line in panel.lines]
        for drawn, line in zip(lines, panel.lines):
            xy = polyline_xy(drawn)
            assert len(xy) == len(line.points)
            assert all(left < x < right and top < y < bottom for x, y in xy)
            assert [x for x, _ in xy] == sorted(x for x, _ in xy)            # x grows to the right
            # a decade as long on both axes, in every panel: the pixel slope is k (SVG y points down)
            (xa, ya), (xb, yb) = xy[0], xy[-1]
            (va, sa), (vb, sb) = line.points[0], line.points[-1]
            k = math.log(sb / sa) / math.log(vb / va)
            assert (ya - yb) / (xb - xa) == pytest.approx(k, abs=0.01)
            assert exponent(line) == pytest.approx(k)
            labels = [t.text for t in group.findall(f"{SVG}text") if t.text and t.text.startswith(line.label + " (k")]
            assert labels == [f"{line.label} (k = {k:.2f})"]


def test_every_axis_has_labels_to_read_seconds_and_sizes_by():
    panels, _ = panels_of(CASES)
    for group in ET.fromstring(render_svg(panels)).findall(f"{SVG}g"):
        texts = group.findall(f"{SVG}text")
        y_labels = [t.text for t in texts if t.get("text-anchor") == "end"]
        x_labels = [t.text for t in texts if t.get("text-anchor") == "middle" and not t.text.startswith(
            ("rows", "file", "log", "data"))]
        assert len(y_labels) >= 3 and len(x_labels) >= 2, (y_labels, x_labels)


def test_points_that_cannot_be_drawn_are_left_out_and_said(tmp_path):
    # times rounded to 0 or missing: the read keeps one point (no line), the compaction two
    rounded = [scaling("scaling: cost vs file groups", [(5, 500_000, 0.0, 0.63), (20, 500_000, None, 0.0),
                                                        (80, 500_000, 0.84, 1.30)])]
    panels, _ = panels_of(rounded)
    assert [(line.label, line.points) for line in panels[0].lines] == [("compaction", ((5, 0.63), (80, 1.30)))]
    # a tiny scale: every point of the rows series has the same rows, nothing to draw along them
    tiny = [scaling("scaling: cost vs rows", [(250_000, 20_000, 0.3, 0.3), (500_000, 20_000, 0.31, 0.3),
                                              (1_000_000, 20_000, 0.3, 0.32)])]
    assert panels_of(tiny) == ([], [])
    capped = [planning("planning: compaction plan (build_plan, force)", (1_006, 0.01), (10_051, 0.08),
                       (100_510, 10.0), capped=True), CASES[4]]
    panels, notes = panels_of(capped)
    assert [line.label for line in panels[0].lines] == ["clean planning"]
    assert notes == ["compaction planning on the large timeline stopped at its 10.0 s cap, not drawn"]
    write_growth_svg(capped, tmp_path / "g.svg")
    assert notes[0] in (tmp_path / "g.svg").read_text()


def test_reports_without_growth_data_draw_nothing_and_leave_no_older_drawing(tmp_path):
    older = [{"case": "planning: clean plan", "rows": 100_510, "tablesvc_s": 0.7, "baseline_s": 0.01,
              "extra": {"mid_files": 10_051, "mid_s": 0.06}}]     # written before small_files was recorded
    out = tmp_path / "g.svg"
    for cases in ([], CASES[5:], older):
        out.write_text("<svg>an earlier report's</svg>")
        assert panels_of(cases) == ([], [])
        assert write_growth_svg(cases, out) is False
        assert not out.exists()


def test_the_command_draws_a_report_and_refuses_one_without_series(tmp_path, capsys):
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"meta": {"when": "2026-11-22 21:20:00"}, "cases": CASES}))
    assert main([str(report), str(tmp_path / "out.svg")]) == 0
    assert "2026-11-22 21:20:00" in (tmp_path / "out.svg").read_text()
    report.write_text(json.dumps({"meta": {}, "cases": CASES[5:]}))
    assert main([str(report), str(tmp_path / "none.svg")]) == 1
    assert "no scaling or planning cases" in capsys.readouterr().err
    assert main([]) == 2
