from forgetui.report.chart import Point, pareto_front, text_chart


def test_pareto_front_keeps_only_undominated_models() -> None:
    points = [Point("fast-dumb", 120, 0.4), Point("slow-smart", 20, 0.9), Point("mid", 60, 0.7),
              Point("dominated", 50, 0.6), Point("tie-fast", 120, 0.3)]
    assert [p.label for p in pareto_front(points)] == ["fast-dumb", "mid", "slow-smart"]


def test_text_chart_places_and_marks_points() -> None:
    points = [Point("a", 100, 1.0), Point("b", 0, 0.0), Point("c", 50, 0.5)]
    chart = text_chart(points, width=21, height=11).splitlines()
    assert chart[0].startswith("100% |") and chart[0].endswith("1*")  # a: top right, on the front
    assert chart[10] == "  0% |3"  # b: bottom left, dominated
    assert chart[5][6 + 10] == "2"  # c: middle of both axes
    assert "  1. a: 100% at 100.0 tok/s (Pareto front)" in chart
    assert "  3. b: 0% at 0.0 tok/s" in chart
    assert text_chart([]).startswith("(no model")
