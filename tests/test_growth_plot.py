"""The benchmark report's growth plot (tests/benchmarks/growth_plot.py): which series it draws
and where their points land."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

from growth_plot import main, panels_of, render_svg, write_growth_svg

SVG = "{http://www.w3.org/2000/svg}"


def scaling(case: str, points: list[tuple[float, float, float]]) -> dict:
    return {"case": case, "rows": 0, "tablesvc_s": points[-1][2], "baseline_s": points[0][2],
            "extra": {"points": [{"x": x, "rows": 500_000, "read_s": r, "compaction_s": c} for x, r, c in points]}}


def planning(case: str, small: tuple[int, float], mid: tuple[int, float], big: tuple[int, float],
             capped: bool = False) -> dict:
    return {"case": case, "rows": big[0], "tablesvc_s": big[1], "baseline_s": small[1],
            "extra": {"small_files": small[0], "mid_files": mid[0], "mid_s": mid[1], "capped": capped}}


CASES = [
    scaling("scaling: cost vs rows", [(250_000, 0.48, 0.52), (500_000, 0.70, 0.60), (1_000_000, 0.94, 0.87)]),
    scaling("scaling: cost vs file groups", [(5, 0.70, 0.63), (20, 0.58, 0.76), (80, 0.84, 1.30)]),
    scaling("scaling: cost vs log blocks per slice", [(1, 0.61, 0.75), (4, 0.68, 0.77), (16, 1.08, 1.17)]),
    planning("planning: compaction plan (build_plan, force)", (1_006, 0.01), (10_051, 0.077), (100_510, 1.015)),
    planning("planning: clean plan (plan_clean, KEEP_LATEST_COMMITS 10)", (1_006, 0.005), (10_051, 0.059),
             (100_510, 0.781)),
    {"case": "read: snapshot", "rows": 2_000_000, "tablesvc_s": 1.5, "baseline_s": 1.0, "extra": {}},
]


def test_each_series_becomes_a_panel_with_its_measured_points():
    panels = panels_of(CASES)
    assert [p.title for p in panels] == ["rows (20 file groups)", "file groups (500k rows)", "log blocks per slice",
                                         "data files on the timeline"]
    assert [(line.label, line.points) for line in panels[1].lines] == [
        ("snapshot read", ((5, 0.70), (20, 0.58), (80, 0.84))), ("compaction", ((5, 0.63), (20, 0.76), (80, 1.30)))]
    assert [(line.label, line.points) for line in panels[3].lines] == [
        ("compaction planning", ((1_006, 0.01), (10_051, 0.077), (100_510, 1.015))),
        ("clean planning", ((1_006, 0.005), (10_051, 0.059), (100_510, 0.781)))]


def test_points_land_inside_their_panel_on_log_axes():
    root = ET.fromstring(render_svg(panels_of(CASES)))
    groups = root.findall(f"{SVG}g")
    assert len(groups) == 4
    for group, panel in zip(groups, panels_of(CASES)):
        box = group.find(f"{SVG}rect")
        left, top = float(box.get("x")), float(box.get("y"))
        right, bottom = left + float(box.get("width")), top + float(box.get("height"))
        lines = group.findall(f"{SVG}polyline")
        assert [p.get("data-label") for p in lines] == [line.label for line in panel.lines]
        for drawn, line in zip(lines, panel.lines):
            xy = [tuple(map(float, pair.split(","))) for pair in drawn.get("points").split()]
            assert len(xy) == len(line.points)
            assert all(left < x < right and top < y < bottom for x, y in xy)
            assert [x for x, _ in xy] == sorted(x for x, _ in xy)           # x grows to the right
            # the label gives the exponent k of cost ~ x^k from the first to the last point
            (_, ya), (_, yb) = xy[0], xy[-1]
            (va, sa), (vb, sb) = line.points[0], line.points[-1]
            k = math.log(sb / sa) / math.log(vb / va)
            assert (ya > yb) == (k > 0)                                       # rising cost is drawn rising
            labels = [t.text for t in group.findall(f"{SVG}text") if t.text and t.text.startswith(line.label + " (k")]
            assert labels == [f"{line.label} (k = {k:.2f})"]


def test_steeper_growth_is_drawn_steeper_in_the_same_panel():
    root = ET.fromstring(render_svg(panels_of(CASES)))
    file_groups = root.findall(f"{SVG}g")[1]
    slopes = {}
    for drawn in file_groups.findall(f"{SVG}polyline"):
        xy = [tuple(map(float, pair.split(","))) for pair in drawn.get("points").split()]
        slopes[drawn.get("data-label")] = (xy[0][1] - xy[-1][1]) / (xy[-1][0] - xy[0][0])
    # compaction 0.63 -> 1.30 s grows faster than the read 0.70 -> 0.84 s over 5 -> 80 groups
    assert slopes["compaction"] > slopes["snapshot read"] > 0


def test_reports_without_growth_data_draw_nothing(tmp_path):
    capped = [planning("planning: compaction plan (build_plan, force)", (1_006, 0.01), (10_051, 0.08),
                       (100_510, 10.0), capped=True)]
    older = [{"case": "planning: clean plan", "rows": 100_510, "tablesvc_s": 0.7, "baseline_s": 0.01,
              "extra": {"mid_files": 10_051, "mid_s": 0.06}}]     # written before small_files was recorded
    for cases in ([], CASES[5:], capped, older):
        assert panels_of(cases) == []
        assert write_growth_svg(cases, tmp_path / "g.svg") is False
        assert not (tmp_path / "g.svg").exists()


def test_the_command_draws_a_report_and_refuses_one_without_series(tmp_path, capsys):
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"meta": {"when": "2026-11-22 21:20:00"}, "cases": CASES}))
    assert main([str(report), str(tmp_path / "out.svg")]) == 0
    assert "2026-11-22 21:20:00" in (tmp_path / "out.svg").read_text()
    report.write_text(json.dumps({"meta": {}, "cases": CASES[5:]}))
    assert main([str(report), str(tmp_path / "none.svg")]) == 1
    assert "no scaling or planning cases" in capsys.readouterr().err
    assert main([]) == 2
