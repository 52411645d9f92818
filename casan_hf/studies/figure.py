"""The figure of a study: each arm's per-seed differences to its twin, their mean and 95% interval."""

import textwrap
from pathlib import Path

from .paired import mean_std, paired_interval, won


ARM_LINE = 32  # characters of an arm's options on one line of its label


def arm_label(name):
    """A row's label: the arm's context type, then its options on lines of at most `ARM_LINE` characters, broken
    after their commas, so that long arms leave the panel its width."""
    kind, colon, options = name.partition(":")
    if not colon:
        return name
    lines = [""]
    for option in options.split(","):
        piece = option if not lines[-1] else f",{option}"
        if lines[-1] and len(lines[-1]) + len(piece) > ARM_LINE:
            lines[-1] += ","
            lines.append(option)
        else:
            lines[-1] += piece
    return "\n".join([f"{kind}:", *lines])


def paired_figure(comparisons, path):
    """Draws each comparison in a panel of its own: per variant with runs of its twin's seeds, its differences to
    the twin seed by seed (dots), their mean and 95% t interval (a diamond and a bar), and zero, where the variant
    ties its twin; a bar that holds zero is no win. Saves the PNG at `path` and returns the figure."""
    from matplotlib.figure import Figure  # the plot extra, checked by the scripts; no pyplot, no global backend
    from matplotlib.ticker import MaxNLocator

    panels = []
    for comparison in comparisons:
        # Rows are named by the labels that tell them apart (the variant, not the size every row shares).
        columns = range(len(comparison.label_columns))
        all_labels = [labels for labels, *_ in comparison.rows]
        varying = [i for i in columns if len({str(labels[i]) for labels in all_labels}) > 1] or list(columns)

        def name(labels, varying=varying):
            return " ".join(str(labels[i]) for i in varying)

        paired_rows = [
            (arm_label(name(labels)), list(comparison.differences(runs, twin_runs).values()))
            for labels, runs, twin_runs in comparison.rows
            if twin_runs is not None
        ]
        paired_rows = [(label, differences) for label, differences in paired_rows if differences]
        if paired_rows:
            panels.append((comparison, name, paired_rows))
    if not panels:
        raise ValueError("no variant has runs of its twin's seeds to be compared with: nothing to draw")
    # A row is as tall as its label's lines need (a short arm: one line and its options).
    heights = [
        0.9 + sum(max(0.45, 0.17 * len(label.split("\n"))) for label, _ in paired_rows) for *_, paired_rows in panels
    ]
    figure = Figure(figsize=(7.5, sum(heights)))
    axes = figure.subplots(len(panels), 1, height_ratios=heights, squeeze=False)[:, 0]
    for axis, (comparison, name, paired_rows) in zip(axes, panels, strict=True):
        twins = "; ".join(
            f"{name(labels)}: {mean_std(list(comparison.scores(runs).values()), comparison.digits)}"
            for labels, runs, twin_runs in comparison.rows
            if twin_runs is None
        )
        for position, (_, differences) in enumerate(paired_rows):
            spread = [0.25 * (index / max(1, len(differences) - 1) - 0.5) for index in range(len(differences))]
            axis.scatter(differences, [position + offset for offset in spread], s=14, color="0.55", zorder=2)
            if len(differences) > 1:
                mean, _, half = paired_interval(differences)
                axis.errorbar(mean, position, xerr=half, fmt="D", color="C3", markersize=6, capsize=4, zorder=3)
                wins = sum(won(difference, comparison.lower_is_better) for difference in differences)
                label = f"{mean:+.{comparison.digits}f}, won {wins}/{len(differences)}"
                axis.annotate(label, (1.01, position), xycoords=("axes fraction", "data"), va="center", fontsize=8)
        axis.axvline(0.0, color="0.1", linewidth=1.2, zorder=1.5)
        # An arm's options go on lines of their own, a long title on as many as it needs: both stay on the page.
        axis.set_yticks(range(len(paired_rows)), [label for label, _ in paired_rows])
        axis.set_ylim(len(paired_rows) - 0.5, -0.5)
        axis.set_title(textwrap.fill(f"{comparison.title}; twin {twins}", 70), fontsize=9, loc="left")
        axis.grid(axis="x", color="0.9", zorder=0)
        axis.xaxis.set_major_locator(MaxNLocator(nbins=6))  # tick labels apart however narrow the panel
    axes[-1].set_xlabel("difference to the twin of the same seed (dots: seeds; diamond and bar: mean, 95% interval)")
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")  # every label whole, however long the arm names
    return figure
