"""What the commands' pictures share: matplotlib loaded only when asked for, and a look
for each series that stays apart from every other however many there are."""

from __future__ import annotations

from typing import Any

from middleware.errors import MissingExtraError

#: Line styles cycled after the ten colours: series 11 to 20 are dashed, and so on.
LINE_STYLES = ("-", "--", ":", "-.")
#: The baseline's dash (points, times the line width), and its gaps: as long as the dash,
#: or as long as the dashes of the series drawn in them (:func:`over_baseline`).
DASH = 4.0
#: The ten colours of matplotlib's ``tab10``, in its order.
COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


def pyplot(option: str = "--plot") -> Any:
    """``matplotlib.pyplot`` on a backend that writes files, or the error that says which
    extra to install."""
    try:
        import matplotlib  # noqa: PLC0415 - optional extra, imported only when asked for
    except ImportError:
        raise MissingExtraError("plot", "matplotlib>=3.7", option) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def style(index: int, *, baseline: bool = False) -> dict[str, Any]:
    """How series ``index`` is drawn: a colour and, past ten series, a line style, so no
    two of the first forty look alike; the baseline (no middleware) dashed black, on top
    of them (a series equal to it is drawn in its gaps: :func:`over_baseline`)."""
    if baseline:
        return {"color": "black", "linestyle": _dashes(0, 2), "linewidth": 1.6, "zorder": 3}
    return {
        "color": COLOURS[index % len(COLOURS)],
        "linestyle": LINE_STYLES[(index // len(COLOURS)) % len(LINE_STYLES)],
        "linewidth": 1.4,
    }


def over_baseline(look: dict[str, Any], place: int, count: int) -> dict[str, Any]:
    """How the ``place``-th (from 1) of ``count`` series equal to the baseline's, and the
    baseline itself (``place`` 0), are drawn: each its own dash in turn, in its own colour
    and above the other series, so none of them hides another."""
    return {
        **look,
        "linestyle": _dashes(place, count + 1),
        "linewidth": 1.6,
        "zorder": 3 + (place > 0),
    }


def _dashes(place: int, lines: int) -> tuple[float, tuple[float, float]]:
    """Matplotlib's dash pattern (offset, (on, off)) of the ``place``-th of ``lines``
    dashed lines drawn over one another: one dash each, in turn."""
    period = DASH * lines
    return ((period - DASH * place) % period, (DASH, period - DASH))


def integer_ticks(axis: Any) -> None:
    """Ticks of ``axis`` on whole numbers only (a count, such as model calls or tokens,
    has no call 2.5), even over a range of less than two, in round steps (1, 2 or 5 times
    a power of ten: not matplotlib's 8,000 or 15)."""
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415 - optional extra

    axis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1, steps=[1, 2, 5, 10]))


def thousands(axis: Any) -> None:
    """Tick labels of ``axis`` (an Axes' ``yaxis``) as whole numbers with thousands
    separators (``1,200,000``), not an offset such as ``1e6`` above the axis."""
    from matplotlib.ticker import FuncFormatter  # noqa: PLC0415 - optional extra

    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
