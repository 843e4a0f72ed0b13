"""The audit page's plot: both intervals as bands narrowing as decisions arrive, their point estimates, and the
judge's own figure as a dashed line. Geometry only (coordinates, labels, CSS classes from curation.charts); the
template draws it as inline SVG."""

import math

from simia_web.curation.charts import SERIES_COLOURS, WIDTH

HEIGHT = 180
LEFT, RIGHT, TOP = 44, WIDTH - 16, 8
SERIES = (("estimate", "prediction-powered"), ("human_only", "human only"))


def _ceiling(value: float) -> float:
    """A round top for the rate axis above `value` (5 points at least)."""
    for top in (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0):
        if value <= top:
            return top
    return 1.0


def interval_plot(trace: list[dict], judge_only: float) -> dict | None:
    """Bands (low to high) and lines (the point) per interval over the decisions counted, k = 1 … K."""
    if not trace:
        return None
    highs = [p[name].high for p in trace for name, _ in SERIES if p[name] is not None]
    top = _ceiling(max([*highs, judge_only, 0.01]))
    last = trace[-1]["k"]

    def x(k: int) -> float:
        return round(LEFT + (RIGHT - LEFT) * ((k - 1) / max(last - 1, 1)), 1)

    def y(rate: float) -> float:
        return round(TOP + (HEIGHT - TOP) * (1 - min(rate, top) / top), 1)

    series = []
    for i, (name, label) in enumerate(SERIES):
        points = [(p["k"], p[name]) for p in trace if p[name] is not None]
        if not points:
            continue
        upper = [f"{x(k)},{y(interval.high)}" for k, interval in points]
        lower = [f"{x(k)},{y(interval.low)}" for k, interval in reversed(points)]
        series.append(
            {
                "name": label,
                "cls": SERIES_COLOURS[i],
                "band": " ".join(upper + lower),
                "line": " ".join(f"{x(k)},{y(interval.error_rate)}" for k, interval in points),
                "last": points[-1][1],
            }
        )
    ticks = [
        {"y": y(top * share), "label": f"{top * share:.0%}" if top >= 0.1 else f"{top * share:.1%}"}
        for share in (0, 0.5, 1)
    ]
    return {
        "width": WIDTH,
        "height": HEIGHT + 24,
        "left": LEFT,
        "right": RIGHT,
        "bottom": HEIGHT,
        "series": series,
        "ticks": ticks,
        "judge_y": y(judge_only) if math.isfinite(judge_only) else None,
        "judge_only": judge_only,
        "judge_cls": SERIES_COLOURS[2],
        "last_k": last,
    }
