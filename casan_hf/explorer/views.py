"""The explorer's page without Gradio: what one submission computes, and the HTML of every view drawn from it.

`submit` loads the checkpoints (a `ModelCache` keeps them between submissions) and runs each model once on the
text, through `casan_hf.inspection`; the views (`prediction_html`, `gates_html`, `attention_html`, `hops_html`,
`difference_html`) take its `Exploration`s and nothing else, so switching the layer or head recomputes nothing.
The heatmaps are HTML tables, tokens down the rows, coloured with the colormaps of scripts/plot_attention.py
(viridis gates on one scale for the layers with context, grey where a layer has none; blue attention; magma
pooling hops); each cell holds its exact value in `data-value` and its `title`.
"""

import dataclasses
import html
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import Normalize, to_hex
from transformers import AutoConfig

from ..families import get_family
from ..inspection import (
    MAX_TOKENS,
    AttentionInspection,
    Prediction,
    inspect_attention,
    load_for_inspection,
    predict,
)


NO_CONTEXT_GREY = "#d9d9d9"  # matplotlib's "0.85", the grey of the PNG's layers without context
STYLE = """<style>
.casan-view {overflow:auto; max-height:80vh; font-size:12px; line-height:1.2}
.casan-view table {border-collapse:collapse; margin:0; width:auto}
.casan-view th, .casan-view td {border:none !important; padding:1px 4px !important; font-size:12px}
.casan-view th {font-weight:normal; white-space:nowrap; text-align:right}
.casan-view td {text-align:center}
.casan-view table.casan-map td {width:var(--cell); min-width:var(--cell); height:var(--cell); padding:0 !important}
.casan-view table.casan-map tbody th {height:var(--cell); padding:0 4px !important}
.casan-view table.casan-map thead th {writing-mode:vertical-rl; transform:rotate(180deg); padding:4px 0 !important;
  text-align:left}
.casan-view .casan-caption {margin:4px 0; font-weight:600; max-width:360px}
</style>"""


@dataclass
class Exploration:
    """One model's run on one submission: the checkpoint's `name`, its class, what `inspect_attention` saw (less
    the logits, which `prediction` has read), what its head predicts, and how many tokens the text(s) had
    before being cut to `max_tokens`."""

    name: str
    model_class: str
    inspection: AttentionInspection
    prediction: Prediction
    num_tokens_before_cut: int
    max_tokens: int

    @property
    def short_name(self):
        """The name in the views' captions: a Hub id, or a folder's last two path parts."""
        return "/".join(Path(self.name).parts[-2:]) if os.path.isdir(self.name) else self.name

    @property
    def num_layers(self):
        return self.inspection.attentions.shape[0]

    @property
    def num_heads(self):
        return self.inspection.attentions.shape[1]


def load_checkpoint(name):
    """(model, tokenizer) of a folder or Hub id, or a ValueError that says what is wrong with `name`: no such
    folder or id, a model type outside CASAN's families, a causal language model (`refuse_causal`), a head that
    cannot be inspected."""
    if not name:
        raise ValueError("Enter a checkpoint: a local folder or a Hub id.")
    try:
        refuse_causal(AutoConfig.from_pretrained(name))
        return load_for_inspection(name)
    except (OSError, ValueError) as error:
        raise ValueError(f"Cannot show {name!r}: {error}") from error


def refuse_causal(config):
    """A ValueError for a causal language model's checkpoint, before any weights are read: the page is built for the
    encoders (a text pair, pooling hops, their heads' predictions), and scripts/plot_attention.py draws a causal
    model's gates and attention."""
    if get_family(config.model_type).causal:
        raise ValueError(
            f"A {config.model_type} checkpoint is a causal language model, which the explorer does not show; "
            "scripts/plot_attention.py draws its gates and attention."
        )


class ModelCache:
    """The loaded checkpoints of the latest submission (a model and the one it is compared with), by name: a
    new text reruns them without reloading, a new name loads it and lets the unused one go."""

    def __init__(self, load=load_checkpoint):
        self.load = load
        self.loaded = {}

    def get(self, names):
        kept = {name: self.loaded[name] if name in self.loaded else self.load(name) for name in names}
        self.loaded = kept
        return [kept[name] for name in names]


def submit(cache, model_name, compare_name, text, pair, max_tokens=MAX_TOKENS):
    """Runs the model (and the one to compare with, if named) once on `text` (and `pair`), cut to `max_tokens`
    tokens; returns their `Exploration`s, or a ValueError for the page."""
    names = [name.strip() for name in (model_name or "", compare_name or "")]
    text, pair = (text or "").strip(), (pair or "").strip() or None
    if not text:
        raise ValueError("Enter a text.")
    names = names[:1] if not names[1] else names
    explorations = []
    for name, (model, tokenizer) in zip(names, cache.get(names), strict=True):
        inspection = inspect_attention(model, tokenizer, text, pair, max_length=max_tokens)
        prediction = predict(model, tokenizer, inspection)
        explorations.append(
            Exploration(
                name=name,
                model_class=type(model).__name__,
                # The page's state keeps what the views draw; a masked LM's logits (tokens x vocabulary) it drops.
                inspection=dataclasses.replace(inspection, logits=None),
                prediction=prediction,
                num_tokens_before_cut=len(tokenizer(text, pair)["input_ids"]),
                max_tokens=max_tokens,
            )
        )
    return explorations


def status_markdown(explorations):
    """What ran, on how many tokens, and whether the text was cut (the views keep `max_tokens` readable)."""
    lines = []
    for exploration in explorations:
        count = len(exploration.inspection.tokens)
        line = f"Ran **{exploration.name}** ({exploration.model_class}) on {count} tokens."
        if exploration.num_tokens_before_cut > count:
            line += (
                f" The text had {exploration.num_tokens_before_cut} tokens and was cut to {exploration.max_tokens}, "
                "the most the maps keep readable."
            )
        lines.append(line)
    return "\n\n".join(lines)


def escape(text):
    return html.escape(str(text), quote=True)


def view(caption, body):
    return f'{STYLE}<div class="casan-view"><div class="casan-caption">{escape(caption)}</div>{body}</div>'


def note(text):
    return f'<div class="casan-view"><p class="casan-note">{escape(text)}</p></div>'


def prediction_html(exploration):
    """The head's prediction: its one-line summary and the table behind it."""
    prediction = exploration.prediction
    header = "".join(f"<th>{escape(column)}</th>" for column in prediction.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape(format_value(value))}</td>" for value in row) + "</tr>"
        for row in prediction.rows
    )
    table = f"<table><thead><tr>{header}</tr></thead><tbody>{rows}</tbody></table>" if prediction.rows else ""
    return view(f"{exploration.short_name}: {prediction.summary}", table)


def format_value(value):
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def heatmap(tokens, columns, values, colormap, vmin, vmax, tip, grey_columns=(), with_text=False, map_cell=None):
    """An HTML table: `tokens` down the rows, `columns` across, each cell coloured by `values` (rows x columns)
    on `colormap` over [vmin, vmax] and titled `tip(row, column, value)`; `grey_columns` are drawn grey and
    empty. `map_cell` (pixels) makes the square cells of an attention map, with the column labels upright."""
    cmap, norm = colormaps[colormap], Normalize(vmin=vmin, vmax=vmax if vmax > vmin else vmin + 1e-12)
    header = "<th></th>" + "".join(f"<th>{escape(column)}</th>" for column in columns)
    body = []
    for row, token in enumerate(tokens):
        cells = [f"<th>{escape(token)}</th>"]
        for column in range(len(columns)):
            if column in grey_columns:
                cells.append(f'<td class="casan-none" style="background:{NO_CONTEXT_GREY}" title="no context"></td>')
                continue
            value = float(values[row, column])
            red, green, blue, _ = cmap(norm(value))
            ink = "#fff" if 0.299 * red + 0.587 * green + 0.114 * blue < 0.5 else "#000"
            text = f"{value:.3f}" if with_text else ""
            cells.append(
                f'<td style="background:{to_hex(cmap(norm(value)))};color:{ink}" data-value="{value:.6g}" '
                f'title="{escape(tip(row, column, value))}">{text}</td>'
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    table_class, style = ("casan-map", f' style="--cell:{map_cell}px"') if map_cell else ("casan-table", "")
    return (
        f'<table class="{table_class}"{style}><thead><tr>{header}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def map_cell_pixels(num_tokens):
    """Side of an attention map's cell: larger for short texts, never under the 14 px of a token's label."""
    return int(min(22, max(14, 800 // num_tokens)))


# The gate heatmap's column groups: (label of a column, what the tooltip calls it).
GATE_KINDS = (("λ_Q", "query gate"), ("λ_K", "key gate"), ("g_O", "output gate"))


def gates_html(exploration):
    """The query and key gates of every layer over the tokens (and the output gates, where the model has them), on
    one scale; layers whose query and key take no context grey."""
    inspection = exploration.inspection
    if inspection.query_gates is None:
        return note(f"{exploration.short_name}: no gates ({exploration.model_class} has no context).")
    num_layers = exploration.num_layers
    vmin, vmax = inspection.gate_range()
    groups = [inspection.query_gates, inspection.key_gates]
    if inspection.output_gates is not None:
        groups.append(inspection.output_gates)
    values = np.concatenate([gates.T.numpy() for gates in groups], axis=1)
    columns = [f"{label} {layer}" for label, _ in GATE_KINDS[: len(groups)] for layer in range(num_layers)]
    without = [layer for layer, has in enumerate(inspection.layers_with_context) if not has]
    grey = {*without, *(num_layers + layer for layer in without)}

    def tip(row, column, value):
        kind, layer = GATE_KINDS[column // num_layers][1], column % num_layers
        return f"{inspection.tokens[row]}: {kind} of layer {layer} = {value:.4f}"

    table = heatmap(inspection.tokens, columns, values, "viridis", vmin, vmax, tip, grey, with_text=True)
    shown = "query gates λ_Q and key gates λ_K" + (", output gates g_O" if len(groups) > 2 else "")
    caption = f"{exploration.short_name}: {shown} by layer (scale {vmin:.3f} to {vmax:.3f}"
    caption += f"; grey: layers {', '.join(map(str, without))} take no context)" if without else ")"
    return view(caption, table)


def attention_html(exploration, layer, head):
    """The attention map of `layer` and `head`: row i is where token i looks."""
    if not (0 <= layer < exploration.num_layers and 0 <= head < exploration.num_heads):
        return note(
            f"{exploration.short_name} has {exploration.num_layers} layers and {exploration.num_heads} heads: "
            f"no layer {layer}, head {head}."
        )
    tokens = exploration.inspection.tokens
    values = exploration.inspection.attentions[layer, head].numpy()

    def tip(row, column, value):
        return f"{tokens[row]} → {tokens[column]}: {value:.4f}"

    table = heatmap(
        tokens, tokens, values, "Blues", 0.0, float(values.max()), tip, map_cell=map_cell_pixels(len(tokens))
    )
    return view(f"{exploration.short_name}: attention of layer {layer}, head {head} (rows attend to columns)", table)


def difference_html(first, second, layer, head):
    """The first model's attention map minus the second's (red: the first attends more), on a scale symmetric
    about 0; a note where the two cannot be subtracted (other tokens, or no such layer or head in one)."""
    if first.inspection.tokens != second.inspection.tokens:
        return note("No difference map: the two checkpoints cut the text into different tokens.")
    for exploration in (first, second):
        if not (0 <= layer < exploration.num_layers and 0 <= head < exploration.num_heads):
            return note(f"No difference map: {exploration.short_name} has no layer {layer}, head {head}.")
    tokens = first.inspection.tokens
    values = (first.inspection.attentions[layer, head] - second.inspection.attentions[layer, head]).numpy()
    bound = float(np.abs(values).max())

    def tip(row, column, value):
        return f"{tokens[row]} → {tokens[column]}: {value:+.4f}"

    table = heatmap(tokens, tokens, values, "RdBu_r", -bound, bound, tip, map_cell=map_cell_pixels(len(tokens)))
    caption = f"difference, layer {layer}, head {head}: {first.short_name} minus {second.short_name}"
    caption += " (red: the first attends more)"
    return view(caption, table)


def hops_html(exploration):
    """The pooling hops (structured) or heads (generalized) over the tokens, for a head that pools with attention."""
    hops = exploration.inspection.pooling_attentions
    if hops is None:
        return note(
            f"{exploration.short_name}: no pooling hops ({exploration.model_class} does not pool with attention)."
        )
    tokens = exploration.inspection.tokens

    def tip(row, column, value):
        return f"{tokens[row]}: weight in hop {column} = {value:.4f}"

    table = heatmap(
        tokens, list(range(hops.shape[0])), hops.T.numpy(), "magma", 0.0, float(hops.max()), tip, with_text=True
    )
    return view(f"{exploration.short_name}: pooling hops (each column sums to 1)", table)


def local_html(exploration, layer, head):
    """The local bias of `layer` and `head` (`local_bias`): row i is exp(G) over the tokens, 1 at the centre that query
    i predicts and falling over its window; None where the layer adds none."""
    inspection = exploration.inspection
    weights = inspection.local_weights(layer, head) if 0 <= head < exploration.num_heads else None
    if weights is None:
        return None
    tokens = inspection.tokens
    centres, windows = inspection.local_windows[layer][:, head]

    def tip(row, column, value):
        return (
            f"{tokens[row]} → {tokens[column]}: exp(G) = {value:.4f} (centre {float(centres[row]):.2f}, window "
            f"{float(windows[row]):.2f} tokens)"
        )

    table = heatmap(tokens, tokens, weights.numpy(), "Greens", 0.0, 1.0, tip, map_cell=map_cell_pixels(len(tokens)))
    caption = f"{exploration.short_name}: local bias of layer {layer}, head {head}, exp(G) on [0, 1] (each row: "
    caption += "the centre and window its query predicts)"
    return view(caption, table)


def attention_views(explorations, layer, head):
    """The attention maps of `layer` and `head`, side by side with their difference when there are two models, and
    each model's local bias where that layer adds one: the one view that the layer and head choices redraw."""
    maps = [attention_html(exploration, layer, head) for exploration in explorations]
    if len(explorations) == 2:
        maps.append(difference_html(*explorations, layer, head))
    maps += [local for local in (local_html(exploration, layer, head) for exploration in explorations) if local]
    return side_by_side(maps)


def side_by_side(parts):
    return (
        '<div style="display:flex;gap:16px;flex-wrap:wrap">'
        + "".join(f"<div>{part}</div>" for part in parts)
        + "</div>"
    )


def page(explorations, layer, head):
    """Every view of a submission, by name (the Gradio app puts each in its place)."""
    return {
        "status": status_markdown(explorations),
        "prediction": side_by_side([prediction_html(exploration) for exploration in explorations]),
        "gates": side_by_side([gates_html(exploration) for exploration in explorations]),
        "attention": attention_views(explorations, layer, head),
        "hops": side_by_side([hops_html(exploration) for exploration in explorations]),
    }


__all__ = [
    "Exploration",
    "ModelCache",
    "attention_html",
    "attention_views",
    "difference_html",
    "gates_html",
    "hops_html",
    "load_checkpoint",
    "local_html",
    "page",
    "prediction_html",
    "status_markdown",
    "submit",
]
