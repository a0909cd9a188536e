"""A picture of state per key group and per subtask, for current and proposed parallelism."""

from __future__ import annotations

from statesource.errors import StateSourceError
from statesource.skew import OperatorCounts, imbalance


def require_matplotlib() -> None:
    """Import matplotlib for drawing into files, or say how to install it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401 - fails here, not halfway through a plot
    except ImportError:
        raise StateSourceError(
            "--plot needs matplotlib, which is an optional extra: pip install 'statesource[plot]'"
        ) from None


def plot_distribution(op: OperatorCounts, proposed: int | None, path: str) -> None:
    """Write a PNG: bytes per key group on top, bytes per subtask below."""
    require_matplotlib()
    import matplotlib.pyplot as plt
    distribution = op.distribution
    if distribution is None:
        raise StateSourceError(f"operator {op.uid!r} has no keyed state to plot")
    per_group = [size / 1024 for size in distribution.bytes]
    parallelisms = list(dict.fromkeys(p for p in (op.parallelism, proposed) if p))
    panels = 1 + len(parallelisms)
    figure, axes = plt.subplots(panels, 1, figsize=(11, 3.2 * panels), constrained_layout=True)
    top = axes[0]
    top.bar(range(len(per_group)), per_group, width=1.0, color="#4C72B0")
    top.axhline(sum(per_group) / len(per_group), color="#C44E52", linewidth=1, label="mean")
    top.set_title(f"operator {op.uid}: keyed state per key group"
                  f" (max/mean {imbalance(distribution.bytes):.2f})")
    top.set_xlabel("key group")
    top.set_ylabel("KiB")
    top.set_xlim(-0.5, len(per_group) - 0.5)
    top.legend(loc="upper right")
    for axis, parallelism in zip(axes[1:], parallelisms):
        totals = [t / 1024 / 1024 for t in distribution.per_subtask(distribution.bytes,
                                                                     parallelism)]
        label = "current" if parallelism == op.parallelism else "proposed"
        axis.bar(range(parallelism), totals, color="#55A868" if label == "current" else "#8172B2")
        axis.axhline(sum(totals) / parallelism, color="#C44E52", linewidth=1)
        axis.set_title(f"per subtask at parallelism {parallelism} ({label}):"
                       f" max/mean {imbalance(totals):.2f}")
        axis.set_xlabel("subtask")
        axis.set_ylabel("MiB")
        if parallelism <= 32:
            axis.set_xticks(range(parallelism))
    figure.savefig(path, dpi=110)
    plt.close(figure)
