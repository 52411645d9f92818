"""The keys of the gate log: a context gate's mean "gates/layer_<i>/<query|key>", one head's
"gates/layer_<i>/<query|key>/head_<h>", the output gate's "head_gates/layer_<i>/<mean|sparse>". They are written and
read through these functions alone: `casan_hf.training.gates` writes the log, and the model card's gates table and
the studies' records read it. They live here, beside the card, so that the card reads them without importing the
training package, which imports this one."""

import re


# What is logged of the output gate per layer: its mean, and its share of values under
# `casan_hf.training.gates.SPARSE_BELOW`.
OUTPUT_GATE_FIGURES = ("mean", "sparse")
_GATE_KEY = re.compile(r"gates/layer_(\d+)/(\w+)(?:/head_(\d+))?")


def gate_key(layer, target, head=None):
    """The log key of layer `layer`'s mean `target` gate ("gates/layer_2/query"), or of one head's
    ("gates/layer_2/query/head_1")."""
    key = f"gates/layer_{layer}/{target}"
    return key if head is None else f"{key}/head_{head}"


def output_gate_key(layer, figure):
    """The log key of the output gate's `figure` (of `OUTPUT_GATE_FIGURES`) in layer `layer`."""
    return f"head_gates/layer_{layer}/{figure}"


def logged_layers_and_heads(logged):
    """The layers with a context gate in `logged` (a log entry, or `gate_means` output) and the heads with gates of
    their own (none without `gate_per_head`), each sorted; other keys (the output gate's, the loss) are passed by."""
    keys = [match.groups() for match in map(_GATE_KEY.fullmatch, logged) if match]
    return sorted({int(layer) for layer, _, _ in keys}), sorted({int(head) for _, _, head in keys if head is not None})
