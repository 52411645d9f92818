"""The options CASAN adds to a transformers config: `OPTIONS`, one row per option (its group, its kind, its choices
or bounds and its help, from which its check and its error are built), and the values each may take (`GATE_KINDS`,
...; the context types are the rows of `context.CONTEXT_KINDS`).

Everything that exposes an option is derived from this table: the checks `CasanConfig` runs whenever an option
is set, its docstring, every script's flag (`casan_hf.cli`), the model card. An option's default and type are
its field in `CasanConfig` (`configuration_casan.py`).
"""

import numbers
from collections.abc import Collection
from dataclasses import dataclass

from .context import CONTEXT_KINDS, CONTEXT_TARGETS


GATE_KINDS = ("dynamic", "fixed")
# The output gate's granularity (one gate per head and token, or per channel and token) and its start: "one" is
# 2 sigmoid(z) from zero weights (exactly 1: a converted checkpoint keeps its outputs), "half" the plain sigmoid of
# Qiu et al. (2025) from normal weights (near 0.5, for a model trained from scratch).
OUTPUT_GATES = ("headwise", "elementwise")
OUTPUT_GATE_STARTS = ("one", "half")
CLASSIFIER_POOLINGS = ("cls", "mean", "structured", "generalized")
# The poolings that attend over the tokens with `pooling_hops` heads of width `pooling_hidden`.
ATTENTIVE_POOLINGS = ("structured", "generalized")
# Generalized pooling's three diversity penalties (Chen et al. 2018), each with a weight and a margin.
GENERALIZED_PENALTIES = ("parameter", "attention", "output")
# The local context of Yang et al. (EMNLP 2018; Neurocomputing 2021): a Gaussian bias on the attention logits around a
# predicted centre, whose window is a constant ("fixed"), one per layer and sentence from the mean key ("layer"), or
# one per query ("query"). Its start: "full" adds the bias as the paper does (a model trained from scratch); "zero"
# scales it by a learned per-head factor that starts at 0, so that a converted checkpoint keeps its outputs.
LOCAL_BIASES = ("fixed", "layer", "query")
# How the context's gates start: "gate" at the gate's own start (sigmoid(gate_bias_init), or the fixed gate), as the
# paper mixes; "zero" times a learned factor per target that starts at 0, so that a converted checkpoint gives its
# source's outputs exactly until it trains (what converting a causal LM sets).
CONTEXT_STARTS = ("gate", "zero")
LOCAL_BIAS_STARTS = ("full", "zero")


def _is_int(value):
    """A Python or NumPy integer (`np.int64(8)`, as a NumPy-driven sweep passes it), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value):
    """A Python or NumPy int or float (`np.float32(-4.0)`), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_choice(option, value):
    """One of the option's choices (or None, where it means something), compared choice by choice, never hashed: a
    list or an object from a config.json is refused like any other value."""
    if not any(value == choice for choice in option.choices):
        allowed = option.choices if option.none_means is None else (None, *option.choices)
        raise ValueError(f"`{option.name}` must be one of {', '.join(repr(a) for a in allowed)}; got {value!r}.")
    return value


def _check_subset(option, value):
    """A list of distinct choices, kept in the choices' order so that equal configs serialise equally."""
    choices = list(option.choices)
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError(f"`{option.name}` must be a list drawn from {choices}; got {value!r}.")
    if any(item not in choices for item in value) or len(set(value)) != len(value):
        raise ValueError(f"`{option.name}` must be a list of distinct values from {choices}; got {value!r}.")
    return [choice for choice in choices if choice in value]


def _check_layers(option, value):
    """A non-empty list of distinct 0-based layer indices, returned sorted."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            f"`{option.name}` must be None ({option.none_means}) or a non-empty list of layer indices; got {value!r}."
        )
    if not all(_is_int(index) and index >= 0 for index in value) or len(set(value)) != len(value):
        raise ValueError(f"`{option.name}` must hold distinct 0-based layer indices (ints >= 0); got {value!r}.")
    return sorted(int(index) for index in value)


def _check_bool(option, value):
    if not isinstance(value, bool):
        raise ValueError(f"`{option.name}` must be True or False; got {value!r}.")
    return value


def _check_in_bounds(option, value):
    """An int (kind "int") or a number, int or float but not NaN, stored as a float (kind "number"), within the
    option's bounds."""
    low, high = option.bounds
    is_int = option.kind == "int"
    if not ((_is_int if is_int else _is_number)(value) and low <= value <= high):
        allowed = f"{'an int' if is_int else 'a number'} in {option.range_text}"
        if option.meaning is not None:
            allowed += f" ({option.meaning})"
        if option.none_means is not None:
            allowed = f"None ({option.none_means}) or {allowed}"
        raise ValueError(f"`{option.name}` must be {allowed}; got {value!r}.")
    return int(value) if is_int else float(value)


# What an option's value is, by the `kind` of its row: the check that returns the value to store or raises.
OPTION_KINDS = {
    "choice": _check_choice,
    "subset": _check_subset,
    "layers": _check_layers,
    "bool": _check_bool,
    "int": _check_in_bounds,
    "number": _check_in_bounds,
}
_KINDS_WITH_CHOICES = ("choice", "subset")
_KINDS_WITH_BOUNDS = ("int", "number")


@dataclass(frozen=True)
class CasanOption:
    """One option CASAN adds to `BertConfig`, said once: its check, its error and its help are built from its
    `kind` (a key of `OPTION_KINDS`), `choices` (kinds "choice" and "subset"; a table such as `CONTEXT_KINDS` is
    read when used, as it may grow), `bounds` (kinds "int" and "number": lowest and highest, both allowed),
    `meaning` (what a number is) and `none_means` (where None is allowed: what it means).

    `group` says what it shapes: `"context"` the attention, `"pooling"` the sentence vector of the heads that
    classify one (see `Head.pools_sentence`). `structural` options decide which context parameters exist,
    so a CASAN checkpoint loads only with the values it was saved with. `help`, with the range (`documentation`),
    is shown in the config's docstring and by every script's flag; defaults come from `CasanConfig`.
    """

    name: str
    group: str
    kind: str
    help: str
    choices: Collection | None = None
    bounds: tuple | None = None
    meaning: str | None = None
    none_means: str | None = None
    structural: bool = False
    poolings: tuple = ()  # for a pooling option: the `classifier_pooling` values it shapes

    def __post_init__(self):
        if (
            self.kind not in OPTION_KINDS
            or (self.choices is not None) != (self.kind in _KINDS_WITH_CHOICES)
            or (self.bounds is not None) != (self.kind in _KINDS_WITH_BOUNDS)
            or (self.kind == "layers" and self.none_means is None)
        ):
            raise ValueError(
                f"option `{self.name}`: kind {self.kind!r} must be one of {', '.join(map(repr, OPTION_KINDS))}, "
                f"with choices for {_KINDS_WITH_CHOICES}, bounds for {_KINDS_WITH_BOUNDS} and none_means for "
                f"'layers'; got choices={self.choices!r}, bounds={self.bounds!r}."
            )

    def check(self, value):
        """The value to store, or a ValueError naming the option, `value` and what is allowed."""
        if value is None and self.none_means is not None:
            return None
        return OPTION_KINDS[self.kind](self, value)

    @property
    def range_text(self):
        """The range as the error and the help state it: "[0, 1e+06]"."""
        low, high = self.bounds
        return f"[{low:g}, {high:g}]"

    @property
    def documentation(self):
        """`help`, and the option's range where it has one: what the docstring and the flag say."""
        return f"{self.help} Range: {self.range_text}." if self.bounds is not None else self.help


# The ranges (`bounds`) of the numeric options, which their checks, errors, help (the config's docstring, every
# script's flag) and docs/MODELS.md state. The sizes stop far above the papers' values (Lin et al. 2017: r = 30
# hops, d_a = 350) and any encoder's width, so that a mistyped size (10^12 hops) is refused where it would build a
# model no machine holds. The floats stop where the loss stays finite in float32 and bfloat16 (below 3e38) with labels
# given: a penalty weight times its margin times the 2,016 pairs of 64 heads is at most 2e12, the hop penalty at most
# 1000 * 64^2. The gate's logit stops where the float32 sigmoid is 1, or below 2e-9, and the gate can no longer learn;
# the context's initial standard deviation at 1, 50 times BERT's 0.02.
_SIZE_BOUNDS = (1, 4096)
_PENALTY_BOUNDS = (0.0, 1000.0)
OPTIONS = (
    CasanOption(
        "context_type",
        "context",
        "choice",
        "; ".join(f'"{kind.name}": {kind.description}' for kind in CONTEXT_KINDS.values()) + ".",
        choices=CONTEXT_KINDS,
        structural=True,
    ),
    CasanOption(
        "context_targets",
        "context",
        "subset",
        "Which of the query and key transforms take the context (empty: neither, for a context that drives only "
        "the output gate, `output_gate_context`). V is never touched.",
        choices=CONTEXT_TARGETS,
        structural=True,
    ),
    CasanOption(
        "context_layers",
        "context",
        "layers",
        "0-based indices of the layers that get context; None means all of them. Layers left out attend as "
        "plain BERT (their hidden states still feed the context of later layers).",
        none_means="all layers",
        structural=True,
    ),
    CasanOption(
        "gate",
        "context",
        "choice",
        '"dynamic": the paper\'s per-token sigmoid gate; "fixed": the constant `fixed_gate`.',
        choices=GATE_KINDS,
        structural=True,
    ),
    CasanOption(
        "fixed_gate",
        "context",
        "number",
        'The constant mixing weight lambda used when gate="fixed".',
        bounds=(0.0, 1.0),
        meaning="a mixing weight",
    ),
    CasanOption(
        "gate_bias_init",
        "context",
        "number",
        "Initial bias of the dynamic gate (a logit). sigmoid(-4) = 0.018: a converted checkpoint starts close "
        "to the BERT it came from.",
        bounds=(-20.0, 20.0),
        meaning="a logit",
    ),
    CasanOption(
        "context_start",
        "context",
        "choice",
        '"gate": the gates start where the gate does (sigmoid(gate_bias_init), or `fixed_gate`), as the paper '
        'mixes; "zero": each target\'s gate is scaled by a learned factor that starts at 0, so that a converted '
        "checkpoint gives its source's outputs exactly until it trains (what converting a causal LM sets unless "
        "told otherwise).",
        choices=CONTEXT_STARTS,
        structural=True,
    ),
    CasanOption(
        "gate_per_head",
        "context",
        "bool",
        "False: one dynamic gate per token and target, shared by all heads, from the full query or key (the "
        "paper's equation). True: one gate per token, target and head, from each head's slice of the query or key "
        "and of C U, with gate vectors of d_head that every head shares (the authors' code).",
        structural=True,
    ),
    CasanOption(
        "context_rank",
        "context",
        "int",
        "None for the paper's full-rank U (d_c x d); an int r factors U = A B with A: d_c x r and B: r x d, "
        'the parameter-efficient option for "deep" and "deep_global".',
        bounds=_SIZE_BOUNDS,
        none_means="full-rank U",
        structural=True,
    ),
    CasanOption(
        "context_init_range",
        "context",
        "number",
        "Standard deviation of the normal initialisation of U (or A and B), of the gate vectors and of the output "
        "gate's weights (start 'half'); None uses `initializer_range`.",
        bounds=(0.0, 1.0),
        meaning="a standard deviation",
        none_means="use `initializer_range`",
    ),
    CasanOption(
        "output_gate",
        "context",
        "choice",
        "A sigmoid gate on each attention head's output, before the output projection (Qiu et al. 2025), driven "
        'by the layer input: None (off); "headwise": one gate per head and token; "elementwise": one per channel '
        "and token.",
        choices=OUTPUT_GATES,
        none_means="off",
        structural=True,
    ),
    CasanOption(
        "output_gate_context",
        "context",
        "bool",
        "Whether the layer's context C also drives the output gate, sigmoid(X W + C W_C + b), in every layer that "
        "has context (`context_type`, `context_layers`); the query and key need not take it (`context_targets`).",
        structural=True,
    ),
    CasanOption(
        "output_gate_start",
        "context",
        "choice",
        '"one": the gate is 2 sigmoid(z) with zero weights, exactly 1 at the start, so that a converted checkpoint '
        'keeps its outputs (what `from_pretrained` of a source checkpoint sets unless told otherwise); "half": the '
        "plain sigmoid(z) of Qiu et al. from normal weights, near 0.5, for a model trained from scratch.",
        choices=OUTPUT_GATE_STARTS,
        structural=True,
    ),
    CasanOption(
        "local_bias",
        "context",
        "choice",
        "The local context of Yang et al. (EMNLP 2018): a Gaussian bias -(j - P_i)^2 / (2 sigma_i^2) added to the "
        "attention logits of query i, per head, centred on a position P_i predicted from the query, sigma_i half its "
        'window D_i: None (off); "fixed": D is `local_window`; "layer": one D per sentence and head, from the '
        "layer's mean key; \"query\": one D per query and head, from the query (the paper's best). Positions and "
        "the sentence length count the real tokens only.",
        choices=LOCAL_BIASES,
        none_means="off",
        structural=True,
    ),
    CasanOption(
        "local_layers",
        "context",
        "layers",
        "0-based indices of the layers with the local bias; None means the lower half (layers 0 .. L/2 - 1, the "
        "paper's best: the first three of six).",
        none_means="the lower half",
        structural=True,
    ),
    CasanOption(
        "local_window",
        "context",
        "number",
        "The window D of local_bias=\"fixed\", in tokens (sigma = D / 2); 10 is the authors' code's.",
        bounds=(1.0, 4096.0),
        meaning="a window in tokens",
    ),
    CasanOption(
        "local_bias_start",
        "context",
        "choice",
        '"full": the bias is added as the paper adds it, for a model trained from scratch; "zero": it is scaled by '
        "a learned factor per head that starts at 0, so that a converted checkpoint keeps its outputs exactly (what "
        "`from_pretrained` of a source checkpoint sets unless told otherwise).",
        choices=LOCAL_BIAS_STARTS,
        structural=True,
    ),
    CasanOption(
        "classifier_pooling",
        "pooling",
        "choice",
        'The sentence vector the classifier reads. "cls": BERT\'s pooler on [CLS] (`bert.pooler.*`, so BERT '
        'classifiers load unchanged); "mean": the masked mean of the last layer over the real tokens; '
        '"structured": the structured self-attentive embedding of Lin et al. (2017), `pooling_hops` attention '
        'distributions over the real tokens, concatenated; "generalized": the vector-based multi-head pooling of '
        "Chen et al. (2018), whose `pooling_hops` heads weigh every hidden dimension of every token on its own. "
        "The last three read no pooler, so those heads build none (a BERT checkpoint's pooler weights are "
        "skipped).",
        choices=CLASSIFIER_POOLINGS,
    ),
    CasanOption(
        "pooling_hops",
        "pooling",
        "int",
        'r, the number of attention hops (heads, for "generalized") of the attentive poolings; the classifier '
        "reads r * hidden_size features. A few hops suffice for sentence-pair tasks and keep the classifier "
        "small.",
        bounds=(1, 64),
        poolings=ATTENTIVE_POOLINGS,
    ),
    CasanOption(
        "pooling_hidden",
        "pooling",
        "int",
        'd_a, the hidden width of the hop scorer: W_s2 tanh(W_s1 H^T) for "structured", W_2^i ReLU(W_1^i H^T '
        '+ b_1^i) + b_2^i for each head of "generalized".',
        bounds=_SIZE_BOUNDS,
        poolings=ATTENTIVE_POOLINGS,
    ),
    CasanOption(
        "pooling_penalty",
        "pooling",
        "number",
        "Weight of Lin et al.'s penalty ||A A^T - I||_F^2 (averaged over the batch), added to the loss when "
        "labels are given; it keeps the hops from all attending to the same tokens. 0 turns it off.",
        bounds=_PENALTY_BOUNDS,
        meaning="0 turns the penalty off",
        poolings=("structured",),
    ),
    *(
        option
        for penalty, pulls_apart in (
            ("parameter", "the heads' first-layer weights W_1^i: ||W_1^i - W_1^j||_F^2"),
            ("attention", "the heads' attention matrices A^i: ||A^i - A^j||_F^2, averaged over the batch"),
            ("output", "the heads' outputs v^i: ||v^i - v^j||^2, averaged over the batch"),
        )
        for option in (
            CasanOption(
                f"pooling_{penalty}_penalty",
                "pooling",
                "number",
                f"Weight mu of generalized pooling's {penalty} penalty, sum over pairs of heads i < j of "
                f"max(margin - d_ij, 0), where d_ij is the distance between {pulls_apart}; added to the loss "
                "when labels are given. 0 turns it off.",
                bounds=_PENALTY_BOUNDS,
                meaning="0 turns the penalty off",
                poolings=("generalized",),
            ),
            CasanOption(
                f"pooling_{penalty}_margin",
                "pooling",
                "number",
                f"The margin (threshold lambda) of generalized pooling's {penalty} penalty: pairs of heads "
                "farther apart than it cost nothing.",
                bounds=(0.0, 1e6),
                meaning="the distance the penalty asks for",
                poolings=("generalized",),
            ),
        )
    ),
)

OPTION_GROUPS = ("context", "pooling")
STRUCTURAL_OPTIONS = tuple(option.name for option in OPTIONS if option.structural)


def option_names(*groups):
    """The names of the options in `groups` (all options when none is given), in table order."""
    return tuple(option.name for option in OPTIONS if not groups or option.group in groups)


OPTION_ROWS = {option.name: option for option in OPTIONS}
OPTION_CHECKS = {option.name: option.check for option in OPTIONS}
