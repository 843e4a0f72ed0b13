"""Geometry of the workspace's charts, drawn by templates as inline SVG (no script, no CDN, no style attributes).

Each function takes plain numbers from a selector and returns coordinates and labels; colours are CSS classes.
"""

from datetime import date

from .models import TrajectoryStatus

WIDTH = 560
LABEL_WIDTH = 110
BAR_HEIGHT = 18
ROW_GAP = 6
PLOT_HEIGHT = 140
# Room above a line chart's largest value, so that its dot (radius 3) is drawn whole.
PLOT_TOP = 6

STATUS_COLOURS = {
    "generated": "c-generated",
    "rules_failed": "c-rules",
    "judged_fail": "c-fail",
    "judged_pass": "c-pass",
    "awaiting_review": "c-awaiting",
    "accepted": "c-accepted",
    "rejected": "c-rejected",
}
VERDICT_COLOURS = {"pass": "c-pass", "fail": "c-fail", "none": "c-generated"}
# Legends and tooltips name a segment as the badges do ("Judge: fail", not judged_fail).
KEY_LABELS = {**dict(TrajectoryStatus.choices), "pass": "Judge: pass", "fail": "Judge: fail", "none": "Not judged"}
SERIES_COLOURS = ["s0", "s1", "s2", "s3", "s4", "s5"]


def stacked_bar(data: dict[str, dict[str, int]], colours: dict[str, str]) -> dict:
    """One horizontal bar per label, its segments in the order of `colours`, scaled to the largest total."""
    largest = max((sum(parts.values()) for parts in data.values()), default=0)
    span = WIDTH - LABEL_WIDTH - 60
    rows = []
    for i, (label, parts) in enumerate(data.items()):
        total = sum(parts.values())
        x: float = LABEL_WIDTH
        segments = []
        for key, cls in colours.items():
            n = parts.get(key, 0)
            if not n:
                continue
            width = span * n / largest
            label_of = KEY_LABELS.get(key, key)
            segments.append({"x": round(x, 1), "width": round(max(width, 1), 1), "cls": cls, "n": n, "key": label_of})
            x += width
        y = i * (BAR_HEIGHT + ROW_GAP)
        rows.append(
            {
                "label": label,
                "total": total,
                "y": y,
                "text_y": y + BAR_HEIGHT - 5,
                "end": round(x + 4, 1),
                "segments": segments,
            }
        )
    return {
        "rows": rows,
        "width": WIDTH,
        "height": max(len(rows) * (BAR_HEIGHT + ROW_GAP), BAR_HEIGHT),
        "bar_height": BAR_HEIGHT,
        "label_x": LABEL_WIDTH - 6,
        "legend": [(KEY_LABELS.get(key, key), cls) for key, cls in colours.items()],
    }


def line_chart(series: dict[str, list[tuple[date, float]]]) -> dict:
    """Polylines of numbers per day on a shared day axis, scaled to the largest value (0 at the bottom, the largest
    PLOT_TOP below the top). One day of data is drawn in the middle, under one label."""
    days = sorted({day for points in series.values() for day, _ in points})
    largest = max((value for points in series.values() for _, value in points), default=0) or 1
    left, span = 40, WIDTH - 60
    if len(days) == 1:
        x_of = {days[0]: left + span / 2}
    else:
        step = span / max(len(days) - 1, 1)
        x_of = {day: left + i * step for i, day in enumerate(days)}
    rise = PLOT_HEIGHT - PLOT_TOP
    lines = []
    for k, (name, points) in enumerate(series.items()):
        coords = [(round(x_of[day], 1), round(PLOT_HEIGHT - rise * value / largest, 1)) for day, value in points]
        lines.append(
            {
                "name": name,
                "cls": SERIES_COLOURS[k % len(SERIES_COLOURS)],
                "points": " ".join(f"{x},{y}" for x, y in coords),
                "dots": [
                    {"x": x, "y": y, "day": day, "value": value}
                    for (x, y), (day, value) in zip(coords, points, strict=True)
                ],
            }
        )
    return {
        "lines": lines,
        "width": WIDTH,
        "height": PLOT_HEIGHT + 24,
        "plot_bottom": PLOT_HEIGHT,
        "largest_y": PLOT_TOP + 4,
        "left": left,
        "middle": round(left + span / 2, 1),
        "right": left + span,
        "largest": largest,
        "first_day": days[0] if days else None,
        "last_day": days[-1] if days else None,
        "one_day": len(days) == 1,
    }


def histogram(bins: list[tuple[float, float, int]]) -> dict:
    """Vertical bars for [(low, high, count)]."""
    largest = max((n for _, _, n in bins), default=0) or 1
    left, span = 40, WIDTH - 60
    width = span / max(len(bins), 1)
    bars = []
    for i, (low, high, n) in enumerate(bins):
        height = PLOT_HEIGHT * n / largest
        bars.append(
            {
                "x": round(left + i * width + 1, 1),
                "y": round(PLOT_HEIGHT - height, 1),
                "width": round(width - 2, 1),
                "height": round(height, 1),
                "low": low,
                "high": high,
                "n": n,
                "label_x": round(left + i * width + width / 2, 1),
            }
        )
    return {
        "bars": bars,
        "width": WIDTH,
        "height": PLOT_HEIGHT + 24,
        "plot_bottom": PLOT_HEIGHT,
        "largest": largest,
        "total": sum(n for _, _, n in bins),
    }
