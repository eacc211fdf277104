"""What the commands' pictures share: matplotlib loaded only when asked for, and a look
for each series that stays apart from every other however many there are."""

from __future__ import annotations

from typing import Any

from middleware.errors import MissingExtraError

#: Line styles cycled after the ten colours: series 11 to 20 are dashed, and so on.
LINE_STYLES = ("-", "--", ":", "-.")
#: The ten colours of matplotlib's ``tab10``, in its order.
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip


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
    (a policy that changes nothing shows through its dashes)."""
    if baseline:
        return {"color": "black", "linestyle": "--", "linewidth": 1.6, "zorder": 3}
    return {
        "color": COLOURS[index % len(COLOURS)],
        "linestyle": LINE_STYLES[(index // len(COLOURS)) % len(LINE_STYLES)],
        "linewidth": 1.4,
    }


def thousands(axis: Any) -> None:
    """Tick labels of ``axis`` (an Axes' ``yaxis``) as whole numbers with thousands
    separators (``1,200,000``), not an offset such as ``1e6`` above the axis."""
    from matplotlib.ticker import FuncFormatter  # noqa: PLC0415 - optional extra

    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
