"""Plot what the context does on one text: the query and key gates of every layer, the attention maps of
chosen layers and heads, and the structured pooling's hops when the model has them.

    python scripts/plot_attention.py --model DIR_OR_ID --text "A gripping, funny film." --out attention.png

Works for CASAN checkpoints of every context type, the encoders' and the causal LMs' (Llama, Qwen2, Qwen3, GPT-2:
lower-triangular maps, the next token in the title), and for their families' own (attention maps only). Layers and
heads are 0-based; by default the last layer's heads are drawn. Sentences are cut to `--max-tokens`
(64 by default, `casan_hf.inspection.MAX_TOKENS`, the most the figure keeps readable). The gates are coloured on
the fixed 0 to 1 scale (`--zoom-gates`: from their lowest to their highest value), every attention map on one
scale.
"""

import argparse
import math
import textwrap
from pathlib import Path

from casan_hf.cli.extras import require_packages


require_packages("plot_attention.py", "matplotlib")

import matplotlib


matplotlib.use("Agg")

import numpy as np  # noqa: E402
from matplotlib import pyplot as plt  # noqa: E402
from transformers import AutoConfig  # noqa: E402

from casan_hf.inspection import MAX_TOKENS, checkpoint_head, inspect_attention, load_for_inspection, predict  # noqa: E402


MAPS_PER_ROW = 4
GATE_COLUMN_INCHES = 0.32  # one layer (or hop) column of the gate and hop heatmaps


def token_inches(num_tokens):
    """Side of one token's cell: larger for short sentences, never under the 0.16 inch of a 6.5 pt label."""
    return min(0.32, max(0.16, 8.0 / num_tokens))


def figure_size(num_tokens, num_layers, num_maps, num_hops=0, has_gates=True):
    """(width, height) in inches of the figure for these counts; the saved PNG is this times the dpi."""
    cell = token_inches(num_tokens)
    label_margin = 1.4  # room for token tick labels and titles
    top_width = label_margin + (2 * num_layers * GATE_COLUMN_INCHES + 1.6 if has_gates else 0)
    top_width += num_hops * GATE_COLUMN_INCHES + 1.6 if num_hops else 0
    columns = min(num_maps, MAPS_PER_ROW)
    maps_width = columns * (num_tokens * cell + label_margin + 0.6)
    map_rows = math.ceil(num_maps / MAPS_PER_ROW)
    top_height = num_tokens * cell + label_margin if has_gates or num_hops else 0
    height = top_height + map_rows * (num_tokens * cell + label_margin) + 0.6
    return max(top_width, maps_width), height


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model",
        required=True,
        help="CASAN checkpoint, or its family's own (BERT, Llama, ...): a folder or a Hub id.",
    )
    parser.add_argument(
        "--tokenizer", help="Tokenizer folder or Hub id, if the checkpoint has none (default: --model)."
    )
    parser.add_argument("--text", required=True, help="The sentence to look at.")
    parser.add_argument("--text-pair", help="A second sentence, for sentence-pair models.")
    parser.add_argument("--out", required=True, help="PNG file to write.")
    parser.add_argument(
        "--layers", type=int, nargs="+", help="0-based layers whose attention to draw (default: the last)."
    )
    parser.add_argument(
        "--heads", type=int, nargs="+", help="0-based heads to draw in each chosen layer (default: all)."
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=MAX_TOKENS,
        help=f"Cut the text(s) to this many tokens (default: {MAX_TOKENS}).",
    )
    parser.add_argument("--dpi", type=int, default=100, help="Resolution of the PNG (default: 100).")
    parser.add_argument(
        "--zoom-gates",
        action="store_true",
        help="Colour the gates from their lowest to their highest value on this text, not on the fixed 0 to 1 "
        "scale: differences among gates near their start (0.018) show, but small values look large.",
    )
    args = parser.parse_args(argv)
    if args.dpi <= 0:
        parser.error(f"--dpi must be positive; got {args.dpi}.")
    if args.max_tokens < 3:
        parser.error(f"--max-tokens must be at least 3 (room for the special tokens); got {args.max_tokens}.")

    config = AutoConfig.from_pretrained(args.model)
    try:
        checkpoint_head(config)
    except ValueError as error:
        parser.error(str(error))
    args.layers = check_indices(
        parser, "--layers", args.layers, config.num_hidden_layers, "layers", config.num_hidden_layers - 1
    )
    args.heads = check_indices(parser, "--heads", args.heads, config.num_attention_heads, "heads", None)
    return args


def check_indices(parser, flag, indices, count, noun, default):
    """Indices in range, or an argparse usage error naming the allowed range."""
    if indices is None:
        return list(range(count)) if default is None else [default]
    wrong = [index for index in indices if not 0 <= index < count]
    if wrong:
        parser.error(
            f"{flag} {' '.join(map(str, wrong))} out of range: the model has {count} {noun} (allowed 0..{count - 1})."
        )
    return list(dict.fromkeys(indices))


def heatmap(ax, values, tokens, columns, cmap, vmin, vmax, title):
    """Tokens down the rows, `columns` across; all-zero columns (no context) are drawn grey."""
    masked = np.ma.masked_where(np.broadcast_to((values == 0).all(axis=0), values.shape), values)
    colormap = plt.get_cmap(cmap).with_extremes(bad="0.85")
    image = ax.imshow(masked, cmap=colormap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(columns)), columns)
    ax.set_yticks(range(len(tokens)), tokens)
    ax.set_title(title)
    return image


# The suptitle's size in points: the figure's largest text.
TITLE_POINTS = 14


def plot(inspection, layers, heads, title, dpi=100, zoom_gates=False):
    """The figure for an [`AttentionInspection`]: gates and hops on top, then one map per (layer, head). The gates
    are coloured on the fixed 0 to 1 scale (`zoom_gates`: from their lowest to their highest value), every
    attention map on one scale, from 0 to the largest weight drawn, so that colours compare across heads."""
    tokens = inspection.tokens
    num_tokens = len(tokens)
    num_layers = inspection.attentions.shape[0]
    has_gates = inspection.query_gates is not None
    hops = inspection.pooling_attentions
    num_hops = 0 if hops is None else hops.shape[0]
    maps = [(layer, head) for layer in layers for head in heads]
    width, height = figure_size(num_tokens, num_layers, len(maps), num_hops, has_gates)
    cell = token_inches(num_tokens)
    fontsize = min(10.0, cell * 72 * 0.62)

    figure = plt.figure(figsize=(width, height), dpi=dpi, layout="constrained")
    characters_per_line = max(40, int(width * 72 / (TITLE_POINTS * 0.55)))
    figure.suptitle(textwrap.fill(title, characters_per_line), fontsize=TITLE_POINTS)
    top_height = num_tokens * cell + 1.4 if has_gates or num_hops else 0
    if top_height:
        top, bottom = figure.subfigures(2, 1, height_ratios=[top_height, height - top_height])
    else:
        top, bottom = None, figure

    if top is not None:
        panels = (
            [("query gate λ_Q", inspection.query_gates), ("key gate λ_K", inspection.key_gates)] if has_gates else []
        )
        ratios = [num_layers] * len(panels) + ([num_hops] if num_hops else [])
        axes = top.subplots(1, len(ratios), width_ratios=ratios, sharey=True, squeeze=False)[0]
        layer_names = [str(layer) for layer in range(num_layers)]
        if panels:
            vmin, vmax = inspection.gate_range() if zoom_gates else (0.0, 1.0)
            # The hops panel, if any, comes after the gate panels: zip stops at the gates.
            for ax, (name, values) in zip(axes, panels, strict=False):
                image = heatmap(ax, values.T.numpy(), tokens, layer_names, "viridis", vmin, vmax, name)
                ax.set_xlabel("layer (grey: no context)")
            label = f"gate (zoomed: {vmin:.3g} to {vmax:.3g})" if zoom_gates else "gate (0 to 1)"
            top.colorbar(image, ax=axes[: len(panels)].tolist(), label=label, shrink=0.9)
        if num_hops:
            image = heatmap(
                axes[-1],
                hops.T.numpy(),
                tokens,
                [str(h) for h in range(num_hops)],
                "magma",
                0.0,
                None,
                "pooling hops A",
            )
            axes[-1].set_xlabel("hop")
            top.colorbar(image, ax=axes[-1], label="weight", shrink=0.9)
        for ax in axes:
            ax.tick_params(labelsize=fontsize)

    rows = math.ceil(len(maps) / MAPS_PER_ROW)
    axes = bottom.subplots(rows, min(len(maps), MAPS_PER_ROW), squeeze=False)
    for ax in axes.flat[len(maps) :]:
        ax.set_axis_off()
    largest = max(float(inspection.attentions[layer, head].max()) for layer, head in maps)
    for ax, (layer, head) in zip(axes.flat, maps, strict=False):  # spare axes of a last row were switched off
        image = ax.imshow(
            inspection.attentions[layer, head].numpy(), cmap="Blues", vmin=0.0, vmax=largest, interpolation="nearest"
        )
        ax.set_xticks(range(num_tokens), tokens, rotation=90)
        ax.set_yticks(range(num_tokens), tokens)
        ax.tick_params(labelsize=fontsize)
        ax.set_title(f"layer {layer}, head {head}")
        ax.set_xlabel("attended token (key)")
        ax.set_ylabel("attending token (query)")
    bottom.colorbar(image, ax=axes.flat[: len(maps)].tolist(), label="attention weight (one scale)", shrink=0.8)
    return figure


def describe(model, tokenizer, inspection):
    """A title: the model and what its head predicts."""
    name = model.config.name_or_path or type(model).__name__
    return f"{name} ({type(model).__name__}): {predict(model, tokenizer, inspection).summary}"


def main(argv=None):
    args = parse_args(argv)
    model, tokenizer = load_for_inspection(args.model, tokenizer_name_or_path=args.tokenizer)
    inspection = inspect_attention(model, tokenizer, args.text, args.text_pair, max_length=args.max_tokens)
    title = describe(model, tokenizer, inspection)
    figure = plot(inspection, args.layers, args.heads, title, dpi=args.dpi, zoom_gates=args.zoom_gates)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out, dpi=args.dpi)
    width, height = figure.canvas.get_width_height()
    print(f"Wrote {args.out}: {len(inspection.tokens)} tokens, {width}x{height} pixels.")


if __name__ == "__main__":
    main()
