"""Configuration of context-aware self-attention (CASAN) BERT models.

`CasanConfig` is a `BertConfig` with the context options on top, so every BERT checkpoint's config loads
into it unchanged. Each option is checked whenever it is set (at construction, by `from_pretrained`
keyword arguments, which transformers sets after `__init__`, and from a loaded `config.json`), and the
options that depend on each other are checked again when a model is built from the config.
"""

from dataclasses import field

from transformers import BertConfig


CONTEXT_TYPES = ("global", "deep", "deep_global", "none")
CONTEXT_TARGETS = ("query", "key")
GATE_KINDS = ("dynamic", "fixed")
CLASSIFIER_POOLINGS = ("cls", "mean", "structured")

# The options CASAN adds to BertConfig, in two groups: what makes the attention context-aware, and the
# sentence vector of the classification heads. Scripts expose exactly these as flags.
CONTEXT_OPTIONS = ("context_type", "context_targets", "context_layers", "gate", "fixed_gate", "gate_bias_init", "context_rank", "context_init_range")
POOLING_OPTIONS = ("classifier_pooling", "pooling_hops", "pooling_hidden", "pooling_penalty")

# Every class a saved folder can be loaded as with `trust_remote_code=True`.
AUTO_MAP = {
    "AutoConfig": "configuration_casan.CasanConfig",
    "AutoModel": "modeling_casan.CasanModel",
    "AutoModelForSequenceClassification": "modeling_casan.CasanForSequenceClassification",
    "AutoModelForTokenClassification": "modeling_casan.CasanForTokenClassification",
    "AutoModelForQuestionAnswering": "modeling_casan.CasanForQuestionAnswering",
    "AutoModelForMultipleChoice": "modeling_casan.CasanForMultipleChoice",
    "AutoModelForMaskedLM": "modeling_casan.CasanForMaskedLM",
}


def _allowed(name, value, allowed):
    return ValueError(f"`{name}` must be one of {', '.join(repr(a) for a in allowed)}; got {value!r}.")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_context_type(value):
    if value not in CONTEXT_TYPES:
        raise _allowed("context_type", value, CONTEXT_TYPES)
    return value


def _check_context_targets(value):
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError(
            f"`context_targets` must be a non-empty list drawn from {list(CONTEXT_TARGETS)}; got {value!r}."
        )
    unknown = [target for target in value if target not in CONTEXT_TARGETS]
    if unknown or not value or len(set(value)) != len(value):
        raise ValueError(
            f"`context_targets` must be a non-empty list of distinct values from {list(CONTEXT_TARGETS)}; "
            f"got {value!r}."
        )
    # Kept in canonical order so that equal configs serialise equally.
    return [target for target in CONTEXT_TARGETS if target in value]


def _check_context_layers(value):
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"`context_layers` must be None (all layers) or a non-empty list of layer indices; got {value!r}.")
    if not all(_is_int(index) and index >= 0 for index in value) or len(set(value)) != len(value):
        raise ValueError(f"`context_layers` must hold distinct 0-based layer indices (ints >= 0); got {value!r}.")
    return sorted(value)


def _check_gate(value):
    if value not in GATE_KINDS:
        raise _allowed("gate", value, GATE_KINDS)
    return value


def _check_fixed_gate(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"`fixed_gate` must be a number in [0, 1]; got {value!r}.")
    return float(value)


def _check_gate_bias_init(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
        raise ValueError(f"`gate_bias_init` must be a finite number (a logit); got {value!r}.")
    return float(value)


def _check_context_rank(value):
    if value is not None and not (_is_int(value) and value > 0):
        raise ValueError(f"`context_rank` must be None (full-rank U) or a positive int; got {value!r}.")
    return value


def _check_context_init_range(value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0):
        raise ValueError(f"`context_init_range` must be None (use `initializer_range`) or a number >= 0; got {value!r}.")
    return None if value is None else float(value)


def _check_classifier_pooling(value):
    if value not in CLASSIFIER_POOLINGS:
        raise _allowed("classifier_pooling", value, CLASSIFIER_POOLINGS)
    return value


def _check_positive_int(name):
    def check(value):
        if not (_is_int(value) and value > 0):
            raise ValueError(f"`{name}` must be a positive int; got {value!r}.")
        return value

    return check


def _check_pooling_penalty(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < float("inf"):
        raise ValueError(f"`pooling_penalty` must be a finite number >= 0 (0 turns the penalty off); got {value!r}.")
    return float(value)


_CHECKS = {
    "context_type": _check_context_type,
    "context_targets": _check_context_targets,
    "context_layers": _check_context_layers,
    "gate": _check_gate,
    "fixed_gate": _check_fixed_gate,
    "gate_bias_init": _check_gate_bias_init,
    "context_rank": _check_context_rank,
    "context_init_range": _check_context_init_range,
    "classifier_pooling": _check_classifier_pooling,
    "pooling_hops": _check_positive_int("pooling_hops"),
    "pooling_hidden": _check_positive_int("pooling_hidden"),
    "pooling_penalty": _check_pooling_penalty,
}


class CasanConfig(BertConfig):
    r"""
    A [`BertConfig`] for context-aware self-attention (Yang et al., AAAI 2019). All BERT fields keep their
    meaning; the fields below choose the context.

    Args:
        context_type (`str`, defaults to `"deep_global"`):
            `"global"`: the masked mean of the layer input; `"deep"`: the inputs of all earlier layers,
            position by position (the first layer attends as plain BERT); `"deep_global"`: the global
            vectors of all earlier layers and the current one; `"none"`: exactly BERT.
        context_targets (`list[str]`, defaults to `["query", "key"]`):
            Which of the query and key transforms take the context. V is never touched.
        context_layers (`list[int]`, *optional*):
            0-based indices of the layers that get context; `None` means all of them. Layers left out attend
            as plain BERT (their hidden states still feed the context of later layers).
        gate (`str`, defaults to `"dynamic"`):
            `"dynamic"`: the paper's per-token sigmoid gate; `"fixed"`: a constant `fixed_gate`.
        fixed_gate (`float`, defaults to 0.1):
            The constant mixing weight lambda in [0, 1] used when `gate="fixed"`.
        gate_bias_init (`float`, defaults to -4.0):
            Initial bias of the dynamic gate (a logit). sigmoid(-4) = 0.018: a converted checkpoint starts
            close to the BERT it came from.
        context_rank (`int`, *optional*):
            `None` for the paper's full-rank U (d_c x d); an int r factors U = A B with A: d_c x r and
            B: r x d, the parameter-efficient option for `"deep"` and `"deep_global"`.
        context_init_range (`float`, *optional*):
            Standard deviation of the normal initialisation of U (or A and B) and of the gate vectors;
            defaults to `initializer_range`.
        classifier_pooling (`str`, defaults to `"cls"`):
            The sentence vector read by the sequence-classification and multiple-choice heads. `"cls"`: BERT's
            pooler on [CLS] (`bert.pooler.*`, so BERT classifiers load unchanged); `"mean"`: the masked mean of
            the last layer over the real tokens; `"structured"`: the structured self-attentive embedding of
            Lin et al. (2017), `pooling_hops` attention distributions over the real tokens, concatenated. The
            last two read no pooler, so those heads build none (a BERT checkpoint's pooler weights are skipped).
        pooling_hops (`int`, defaults to 4):
            r, the number of attention hops of `"structured"` pooling; the classifier reads r * hidden_size
            features. A few hops suffice for sentence-pair tasks and keep the classifier small.
        pooling_hidden (`int`, defaults to 128):
            d_a, the hidden width of the hop scorer W_s2 tanh(W_s1 H^T) of `"structured"` pooling.
        pooling_penalty (`float`, defaults to 1.0):
            Weight of Lin et al.'s penalty ||A A^T - I||_F^2 (averaged over the batch), added to the loss when
            labels are given; it keeps the hops from all attending to the same tokens. 1.0 as in the paper;
            0 turns it off.
    """

    model_type = "casan_bert"

    context_type: str = "deep_global"
    context_targets: list = field(default_factory=lambda: list(CONTEXT_TARGETS))
    context_layers: list | None = None
    gate: str = "dynamic"
    fixed_gate: float = 0.1
    gate_bias_init: float = -4.0
    context_rank: int | None = None
    context_init_range: float | None = None
    classifier_pooling: str = "cls"
    pooling_hops: int = 4
    pooling_hidden: int = 128
    pooling_penalty: float = 1.0

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        # A converted BERT config.json says model_type "bert"; the class attribute must win.
        self.__dict__.pop("model_type", None)
        self.auto_map = dict(AUTO_MAP)
        self.check_context_options()

    def __setattr__(self, name, value):
        check = _CHECKS.get(name)
        super().__setattr__(name, value if check is None else check(value))

    def check_context_options(self):
        """Checks the options that depend on each other; models call it again before building."""
        if self.context_layers is not None:
            too_deep = [index for index in self.context_layers if index >= self.num_hidden_layers]
            if too_deep:
                raise ValueError(
                    f"`context_layers` {too_deep} out of range: the model has {self.num_hidden_layers} layers "
                    f"(allowed indices 0..{self.num_hidden_layers - 1})."
                )
        if self.context_rank is not None and self.context_type == "none":
            raise ValueError("`context_rank` has no effect with context_type='none'; leave it None.")

    def layer_has_context(self, layer_index):
        """Whether layer `layer_index` (0-based) mixes context into its query/key."""
        if self.context_type == "none" or (self.context_type == "deep" and layer_index == 0):
            return False
        return self.context_layers is None or layer_index in self.context_layers

    def context_size(self, layer_index):
        """d_c, the width of the context matrix C of layer `layer_index` (0-based)."""
        per_layer = {"global": 1, "deep": layer_index, "deep_global": layer_index + 1, "none": 0}
        return per_layer[self.context_type] * self.hidden_size


__all__ = ["CasanConfig"]
