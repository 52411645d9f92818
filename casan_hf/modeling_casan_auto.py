"""Every CASAN encoder class, gathered from the modeling files: each file lists its own classes in
`FAMILY_CLASSES` (`modeling_casan.py` the BERT-style families'), and `MODEL_CLASSES` joins them in the order of
`FAMILIES` x `HEADS`, with `FAMILY_CONFIGS` their config classes. `casan_class` finds one by family and head;
`casan_twin` converts a loaded transformers model in memory. No model class imports this file, so saved folders
do not carry it.
"""

from . import families
from .configuration_casan import exact_starts
from .context import is_casan_parameter
from .families import CAUSAL_FAMILIES, FAMILIES, HEADS, get_family, get_head
from .modeling_casan import FAMILY_CLASSES as BERT_STYLE_CLASSES
from .modeling_casan_causal import FAMILY_CLASSES as CAUSAL_CLASSES
from .modeling_casan_deberta_v2 import FAMILY_CLASSES as DEBERTA_V2_CLASSES
from .modeling_casan_modernbert import FAMILY_CLASSES as MODERNBERT_CLASSES
from .options import OPTION_CHECKS


def model_classes():
    """Every modeling file's `FAMILY_CLASSES` joined, by (family name, head name) in the order of `FAMILIES` x
    `HEADS`; a row of either table without its class is a KeyError. The tables are read when it is called, so that
    a head added to them (tests/test_made_up_rows.py) is gathered as a real one is at import."""
    file_classes = {**BERT_STYLE_CLASSES, **MODERNBERT_CLASSES, **DEBERTA_V2_CLASSES, **CAUSAL_CLASSES}
    return {
        (family.name, head.name): file_classes[(family.name, head.name)]
        for family in (*families.FAMILIES, *families.CAUSAL_FAMILIES)
        for head in (families.HEADS if family in families.FAMILIES else family.heads)
    }


# Every CASAN encoder class, by (family name, head name), in the order of `FAMILIES` x `HEADS`.
MODEL_CLASSES = model_classes()

# The CASAN config class of each family, by the family's name.
FAMILY_CONFIGS = {
    family.name: MODEL_CLASSES[(family.name, family.heads[0].name)].config_class
    for family in (*FAMILIES, *CAUSAL_FAMILIES)
}

# Head name -> BERT's CASAN class; `MODEL_CLASSES` and `casan_class` hold every family's.
HEAD_CLASSES = {head.name: MODEL_CLASSES[("bert", head.name)] for head in HEADS}


def casan_class(family, head_name):
    """The CASAN class of `head_name` for a `Family`, or for a checkpoint's `model_type` ("roberta" or
    "casan_roberta")."""
    family = get_family(family) if isinstance(family, str) else family
    head = get_head(head_name)
    if head not in family.heads:
        heads = ", ".join(head.name for head in family.heads)
        raise ValueError(f"The {family.name} family has no {head.name!r} head; its heads are {heads}.")
    return MODEL_CLASSES[(family.name, head.name)]


def casan_twin(model, **options):
    """The CASAN model with the weights of a loaded transformers model of a family of `FAMILIES` (any head of
    `HEADS`), built in memory (no save and reload): the same head, config, dtype, device, attention backend and
    train/eval mode, plus the CASAN `options`. Only the context (and an
    attentive pooling) is new; at `context_type="none"` its outputs are the source's. Like `from_pretrained` of
    a source checkpoint, the result has no checkpoint of its own yet."""
    sources = {family.source_class_name(head): (family, head) for family in FAMILIES for head in HEADS}
    source_name = type(model).__name__
    if source_name not in sources:
        raise ValueError(f"casan_twin takes one of {', '.join(sources)}; got {source_name}.")
    unknown = sorted(set(options) - set(OPTION_CHECKS))
    if unknown:
        raise ValueError(f"casan_twin takes CASAN options, one of {', '.join(OPTION_CHECKS)}; got {unknown}.")
    family, head = sources[source_name]
    # A conversion: an output gate asked for starts at exactly 1 and a local bias at 0 unless told otherwise, as
    # `from_pretrained` starts them.
    starts = exact_starts(options)
    config = FAMILY_CONFIGS[family.name].from_dict(model.config.to_dict(), **{**starts, **options})
    config._attn_implementation = model.config._attn_implementation
    twin = casan_class(family, head.name)(config)
    missing, unexpected = twin.load_state_dict(model.state_dict(), strict=False)
    new = [key for key in missing if not is_casan_parameter(key) and not key.startswith("pooling.")]
    dropped = [key for key in unexpected if ".pooler." not in key]  # only "cls" pooling reads the pooler
    if new or dropped:
        raise ValueError(f"{source_name} does not fit {type(twin).__name__}: missing {new}, unexpected {dropped}.")
    twin.name_or_path = ""
    return twin.to(device=model.device, dtype=model.dtype).train(model.training)


__all__ = ["FAMILY_CONFIGS", "HEAD_CLASSES", "MODEL_CLASSES", "casan_class", "casan_twin"]
