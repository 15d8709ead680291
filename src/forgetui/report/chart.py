"""The trade-off between ability and speed: the Pareto front and an image-free text chart."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    label: str
    speed: float  # decode tok/s (higher is better)
    score: float  # pass rate 0..1 (higher is better)


def pareto_front(points: list[Point]) -> list[Point]:
    """Points no other point beats on both axes (at least as good on both, better on one),
    fastest first."""
    front = [p for p in points
             if not any(q.speed >= p.speed and q.score >= p.score and (q.speed > p.speed or q.score > p.score)
                        for q in points)]
    return sorted(front, key=lambda p: (-p.speed, -p.score, p.label))


def text_chart(points: list[Point], width: int = 60, height: int = 16) -> str:
    """Pass rate (y, 0-100 %) against decode rate (x, 0-max tok/s) in plain text. Points are
    numbered; a ``*`` after the number marks the Pareto front; a legend follows the chart."""
    if not points:
        return "(no model has both a pass rate and a decode rate)"
    width, height = max(20, width), max(6, height)
    top = max(p.speed for p in points) or 1.0
    front = {p.label for p in pareto_front(points)}
    grid = [[" "] * width for _ in range(height)]
    ordered = sorted(points, key=lambda p: (-p.score, -p.speed, p.label))
    for n, p in enumerate(ordered, 1):
        x = min(width - 1, round(p.speed / top * (width - 1)))
        y = min(height - 1, round((1 - p.score) * (height - 1)))
        mark = f"{n}{'*' if p.label in front else ''}"
        x = min(x, width - len(mark))
        for i, ch in enumerate(mark):
            grid[y][x + i] = ch
    lines = []
    for row, cells in enumerate(grid):
        label = {0: "100%", (height - 1) // 2: " 50%", height - 1: "  0%"}.get(row, "    ")
        lines.append(f"{label} |{''.join(cells).rstrip()}")
    lines.append("     +" + "-" * width)
    lines.append(f"      0{'decode tok/s'.center(width - 2 - len(f'{top:.0f}'))}{top:.0f}")
    lines.append("")
    for n, p in enumerate(ordered, 1):
        star = " (Pareto front)" if p.label in front else ""
        lines.append(f"  {n}. {p.label}: {round(100 * p.score)}% at {p.speed:.1f} tok/s{star}")
    return "\n".join(lines)
