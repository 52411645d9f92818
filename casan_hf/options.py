"""The options CASAN adds to a transformers config: `OPTIONS`, one row per option (its group, its check, its
help), and the values each may take (`GATE_KINDS`, ...; the context types are the rows of `context.CONTEXT_KINDS`).

Everything that exposes an option is derived from this table: the checks `CasanConfig` runs whenever an option
is set, its docstring, every script's flag (`casan_hf.cli`), the model card. An option's default and type are
its field in `CasanConfig` (`configuration_casan.py`).
"""

import numbers
from collections.abc import Callable, Collection
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
LOCAL_BIAS_STARTS = ("full", "zero")


def _allowed(name, value, allowed):
    return ValueError(f"`{name}` must be one of {', '.join(repr(a) for a in allowed)}; got {value!r}.")


def _is_int(value):
    """A Python or NumPy integer (`np.int64(8)`, as a NumPy-driven sweep passes it), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value):
    """A Python or NumPy int or float (`np.float32(-4.0)`), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _one_of(name, allowed):
    """A check that `value` is in `allowed`, read when it runs (a table such as `CONTEXT_KINDS` may grow). Compared
    choice by choice, never hashed: a list or an object from a config.json is refused like any other value."""

    def check(value):
        if not any(value == choice for choice in allowed):
            raise _allowed(name, value, allowed)
        return value

    return check


def _check_context_targets(value):
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError(f"`context_targets` must be a list drawn from {list(CONTEXT_TARGETS)}; got {value!r}.")
    unknown = [target for target in value if target not in CONTEXT_TARGETS]
    if unknown or len(set(value)) != len(value):
        raise ValueError(
            f"`context_targets` must be a list of distinct values from {list(CONTEXT_TARGETS)}; got {value!r}."
        )
    # Kept in canonical order so that equal configs serialise equally.
    return [target for target in CONTEXT_TARGETS if target in value]


# The range of every numeric option, (lowest, highest), which its check, its error, its help (the config's docstring,
# every script's flag) and docs/MODELS.md state. The sizes stop far above the papers' values (Lin et al. 2017: r = 30
# hops, d_a = 350) and any encoder's width, so that a mistyped size (10^12 hops) is refused where it would build a
# model no machine holds. The floats stop where the loss stays finite in float32 and bfloat16 (below 3e38) with labels
# given: a penalty weight times its margin times the 2,016 pairs of 64 heads is at most 2e12, the hop penalty at most
# 1000 * 64^2. The gate's logit stops where the float32 sigmoid is 1, or below 2e-9, and the gate can no longer learn;
# the context's initial standard deviation at 1, 50 times BERT's 0.02.
BOUNDS = {
    "fixed_gate": (0.0, 1.0),
    "gate_bias_init": (-20.0, 20.0),
    "context_rank": (1, 4096),
    "context_init_range": (0.0, 1.0),
    "local_window": (1.0, 4096.0),
    "pooling_hops": (1, 64),
    "pooling_hidden": (1, 4096),
    "pooling_penalty": (0.0, 1000.0),
    **{f"pooling_{penalty}_penalty": (0.0, 1000.0) for penalty in GENERALIZED_PENALTIES},
    **{f"pooling_{penalty}_margin": (0.0, 1e6) for penalty in GENERALIZED_PENALTIES},
}


def bounds_text(name):
    """`name`'s range as its error and help state it: "[0, 1e+06]"."""
    low, high = BOUNDS[name]
    return f"[{low:g}, {high:g}]"


def _within(name, kind, meaning=None, none_means=None):
    """A check that `value` is within `BOUNDS[name]`: an int (`kind` "int") or a number, int or float but not NaN,
    stored as a float (`kind` "number"); None too where `none_means` says what None means."""
    low, high = BOUNDS[name]
    is_kind = _is_int if kind == "int" else _is_number

    def check(value):
        if value is None and none_means is not None:
            return None
        if not (is_kind(value) and low <= value <= high):
            allowed = f"{'an int' if kind == 'int' else 'a number'} in {bounds_text(name)}"
            if meaning is not None:
                allowed += f" ({meaning})"
            if none_means is not None:
                allowed = f"None ({none_means}) or {allowed}"
            raise ValueError(f"`{name}` must be {allowed}; got {value!r}.")
        return int(value) if kind == "int" else float(value)

    return check


def _none_or_one_of(name, allowed):
    """A check that `value` is None (off) or in `allowed`."""

    def check(value):
        if value is not None and not any(value == choice for choice in allowed):
            raise _allowed(name, value, (None, *allowed))
        return value

    return check


def _check_layers(name, none_means):
    """A check that `value` is None (`none_means`) or a non-empty list of distinct 0-based layer indices, returned
    sorted."""

    def check(value):
        if value is None:
            return None
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
            raise ValueError(
                f"`{name}` must be None ({none_means}) or a non-empty list of layer indices; got {value!r}."
            )
        if not all(_is_int(index) and index >= 0 for index in value) or len(set(value)) != len(value):
            raise ValueError(f"`{name}` must hold distinct 0-based layer indices (ints >= 0); got {value!r}.")
        return sorted(int(index) for index in value)

    return check


def _check_bool(name):
    def check(value):
        if not isinstance(value, bool):
            raise ValueError(f"`{name}` must be True or False; got {value!r}.")
        return value

    return check


@dataclass(frozen=True)
class CasanOption:
    """One option CASAN adds to `BertConfig`.

    `group` says what it shapes: `"context"` the attention, `"pooling"` the sentence vector of the heads that
    classify one (see `Head.pools_sentence`). `structural` options decide which context parameters exist,
    so a CASAN checkpoint loads only with the values it was saved with. `check` returns the value to store
    or raises a ValueError naming the option, the value and what is allowed. `help`, with the range of
    `BOUNDS` (`documentation`), is shown in the config's docstring and by every script's flag; defaults come from
    `CasanConfig`.
    """

    name: str
    group: str
    check: Callable
    help: str
    choices: Collection | None = None  # a table (CONTEXT_KINDS) is read when used
    structural: bool = False
    poolings: tuple = ()  # for a pooling option: the `classifier_pooling` values it shapes

    @property
    def documentation(self):
        """`help`, and the option's range where it has one (`BOUNDS`): what the docstring and the flag say."""
        return f"{self.help} Range: {bounds_text(self.name)}." if self.name in BOUNDS else self.help


OPTIONS = (
    CasanOption(
        "context_type",
        "context",
        _one_of("context_type", CONTEXT_KINDS),
        "; ".join(f'"{kind.name}": {kind.description}' for kind in CONTEXT_KINDS.values()) + ".",
        choices=CONTEXT_KINDS,
        structural=True,
    ),
    CasanOption(
        "context_targets",
        "context",
        _check_context_targets,
        "Which of the query and key transforms take the context (empty: neither, for a context that drives only "
        "the output gate, `output_gate_context`). V is never touched.",
        choices=CONTEXT_TARGETS,
        structural=True,
    ),
    CasanOption(
        "context_layers",
        "context",
        _check_layers("context_layers", "all layers"),
        "0-based indices of the layers that get context; None means all of them. Layers left out attend as "
        "plain BERT (their hidden states still feed the context of later layers).",
        structural=True,
    ),
    CasanOption(
        "gate",
        "context",
        _one_of("gate", GATE_KINDS),
        '"dynamic": the paper\'s per-token sigmoid gate; "fixed": the constant `fixed_gate`.',
        choices=GATE_KINDS,
        structural=True,
    ),
    CasanOption(
        "fixed_gate",
        "context",
        _within("fixed_gate", "number", "a mixing weight"),
        'The constant mixing weight lambda used when gate="fixed".',
    ),
    CasanOption(
        "gate_bias_init",
        "context",
        _within("gate_bias_init", "number", "a logit"),
        "Initial bias of the dynamic gate (a logit). sigmoid(-4) = 0.018: a converted checkpoint starts close "
        "to the BERT it came from.",
    ),
    CasanOption(
        "gate_per_head",
        "context",
        _check_bool("gate_per_head"),
        "False: one dynamic gate per token and target, shared by all heads, from the full query or key (the "
        "paper's equation). True: one gate per token, target and head, from each head's slice of the query or key "
        "and of C U, with gate vectors of d_head that every head shares (the authors' code).",
        structural=True,
    ),
    CasanOption(
        "context_rank",
        "context",
        _within("context_rank", "int", none_means="full-rank U"),
        "None for the paper's full-rank U (d_c x d); an int r factors U = A B with A: d_c x r and B: r x d, "
        'the parameter-efficient option for "deep" and "deep_global".',
        structural=True,
    ),
    CasanOption(
        "context_init_range",
        "context",
        _within("context_init_range", "number", "a standard deviation", none_means="use `initializer_range`"),
        "Standard deviation of the normal initialisation of U (or A and B), of the gate vectors and of the output "
        "gate's weights (start 'half'); None uses `initializer_range`.",
    ),
    CasanOption(
        "output_gate",
        "context",
        _none_or_one_of("output_gate", OUTPUT_GATES),
        "A sigmoid gate on each attention head's output, before the output projection (Qiu et al. 2025), driven "
        'by the layer input: None (off); "headwise": one gate per head and token; "elementwise": one per channel '
        "and token.",
        choices=OUTPUT_GATES,
        structural=True,
    ),
    CasanOption(
        "output_gate_context",
        "context",
        _check_bool("output_gate_context"),
        "Whether the layer's context C also drives the output gate, sigmoid(X W + C W_C + b), in every layer that "
        "has context (`context_type`, `context_layers`); the query and key need not take it (`context_targets`).",
        structural=True,
    ),
    CasanOption(
        "output_gate_start",
        "context",
        _one_of("output_gate_start", OUTPUT_GATE_STARTS),
        '"one": the gate is 2 sigmoid(z) with zero weights, exactly 1 at the start, so that a converted checkpoint '
        'keeps its outputs (what `from_pretrained` of a source checkpoint sets unless told otherwise); "half": the '
        "plain sigmoid(z) of Qiu et al. from normal weights, near 0.5, for a model trained from scratch.",
        choices=OUTPUT_GATE_STARTS,
        structural=True,
    ),
    CasanOption(
        "local_bias",
        "context",
        _none_or_one_of("local_bias", LOCAL_BIASES),
        "The local context of Yang et al. (EMNLP 2018): a Gaussian bias -(j - P_i)^2 / (2 sigma_i^2) added to the "
        "attention logits of query i, per head, centred on a position P_i predicted from the query, sigma_i half its "
        'window D_i: None (off); "fixed": D is `local_window`; "layer": one D per sentence and head, from the '
        "layer's mean key; \"query\": one D per query and head, from the query (the paper's best). Positions and "
        "the sentence length count the real tokens only.",
        choices=LOCAL_BIASES,
        structural=True,
    ),
    CasanOption(
        "local_layers",
        "context",
        _check_layers("local_layers", "the lower half"),
        "0-based indices of the layers with the local bias; None means the lower half (layers 0 .. L/2 - 1, the "
        "paper's best: the first three of six).",
        structural=True,
    ),
    CasanOption(
        "local_window",
        "context",
        _within("local_window", "number", "a window in tokens"),
        "The window D of local_bias=\"fixed\", in tokens (sigma = D / 2); 10 is the authors' code's.",
    ),
    CasanOption(
        "local_bias_start",
        "context",
        _one_of("local_bias_start", LOCAL_BIAS_STARTS),
        '"full": the bias is added as the paper adds it, for a model trained from scratch; "zero": it is scaled by '
        "a learned factor per head that starts at 0, so that a converted checkpoint keeps its outputs exactly (what "
        "`from_pretrained` of a source checkpoint sets unless told otherwise).",
        choices=LOCAL_BIAS_STARTS,
        structural=True,
    ),
    CasanOption(
        "classifier_pooling",
        "pooling",
        _one_of("classifier_pooling", CLASSIFIER_POOLINGS),
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
        _within("pooling_hops", "int"),
        'r, the number of attention hops (heads, for "generalized") of the attentive poolings; the classifier '
        "reads r * hidden_size features. A few hops suffice for sentence-pair tasks and keep the classifier "
        "small.",
        poolings=ATTENTIVE_POOLINGS,
    ),
    CasanOption(
        "pooling_hidden",
        "pooling",
        _within("pooling_hidden", "int"),
        'd_a, the hidden width of the hop scorer: W_s2 tanh(W_s1 H^T) for "structured", W_2^i ReLU(W_1^i H^T '
        '+ b_1^i) + b_2^i for each head of "generalized".',
        poolings=ATTENTIVE_POOLINGS,
    ),
    CasanOption(
        "pooling_penalty",
        "pooling",
        _within("pooling_penalty", "number", "0 turns the penalty off"),
        "Weight of Lin et al.'s penalty ||A A^T - I||_F^2 (averaged over the batch), added to the loss when "
        "labels are given; it keeps the hops from all attending to the same tokens. 0 turns it off.",
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
                _within(f"pooling_{penalty}_penalty", "number", "0 turns the penalty off"),
                f"Weight mu of generalized pooling's {penalty} penalty, sum over pairs of heads i < j of "
                f"max(margin - d_ij, 0), where d_ij is the distance between {pulls_apart}; added to the loss "
                "when labels are given. 0 turns it off.",
                poolings=("generalized",),
            ),
            CasanOption(
                f"pooling_{penalty}_margin",
                "pooling",
                _within(f"pooling_{penalty}_margin", "number", "the distance the penalty asks for"),
                f"The margin (threshold lambda) of generalized pooling's {penalty} penalty: pairs of heads "
                "farther apart than it cost nothing.",
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


OPTION_CHECKS = {option.name: option.check for option in OPTIONS}
