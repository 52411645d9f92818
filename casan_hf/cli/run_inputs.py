"""What a training script trains on: the model class a checkpoint becomes, a tokenizer that fits it, the first
examples of a split, a sequence length the model takes."""

import transformers

from ..compat import PreTrainedConfig
from ..families import FAMILIES, get_family, get_head
from ..modeling_casan_auto import casan_class


def run_model_class(model_name_or_path, head_name, baseline, casan_kwargs, cache_dir=None, sharded=False):
    """The class a run trains from `model_name_or_path`, and the CASAN options to load it with. `baseline`: the
    source family's own model (the head's auto class), which needs a source checkpoint (BERT, RoBERTa, ...) and
    takes no CASAN option, and is not `sharded` (FSDP2 as it loads: transformers' own encoders have no plan for
    their modules); otherwise the CASAN class of the checkpoint's family, converted from a source checkpoint or
    continued from a CASAN one."""
    saved = PreTrainedConfig.get_config_dict(model_name_or_path, cache_dir=cache_dir)[0]
    model_type = saved.get("model_type")
    if not baseline:
        return casan_class(model_type, head_name), casan_kwargs
    head = get_head(head_name)
    trains = "trains" if head.pretrains else "fine-tunes"
    if sharded:
        raise ValueError(
            f"--baseline {trains} transformers' own model, whose FSDP2 plan names a decoder's modules and none of "
            "its own, so --fsdp_size would leave it one unsharded-in-compute group; drop one of them."
        )
    if casan_kwargs:
        raise ValueError(
            f"--baseline {trains} the plain source model; drop the context options {sorted(casan_kwargs)}."
        )
    if get_family(model_type).name != model_type:
        raise ValueError(
            f"--baseline needs the source checkpoint (model_type one of "
            f"{', '.join(repr(family.name) for family in FAMILIES)}); {model_name_or_path!r} has model_type "
            f"{model_type!r}."
        )
    return getattr(transformers, head.auto_class), {}


def check_tokenizer(tokenizer, model, tokenizer_name):
    """A ValueError when `tokenizer` (loaded from `tokenizer_name`) cannot be the model's: it makes ids beyond the
    model's embeddings, or pads with another id (a tokenizer of another family: BERT pads with 0, RoBERTa with
    1). Either would train on wrong tokens without a word, or fail in the first step with an index error."""
    vocab_size = model.config.vocab_size
    if len(tokenizer) > vocab_size:
        raise ValueError(
            f"The tokenizer of {tokenizer_name!r} has {len(tokenizer)} tokens but the model's embeddings hold "
            f"{vocab_size} (config.json vocab_size): it is not this checkpoint's tokenizer."
        )
    model_pad = model.config.pad_token_id
    if tokenizer.pad_token_id is not None and model_pad is not None and tokenizer.pad_token_id != model_pad:
        raise ValueError(
            f"The tokenizer of {tokenizer_name!r} pads with id {tokenizer.pad_token_id} ({tokenizer.pad_token!r}) "
            f"but the model with id {model_pad} (config.json pad_token_id): it is a tokenizer of another family."
        )


def first_examples(dataset, limit):
    """The first `limit` examples of `dataset` (all of them for None)."""
    return dataset if limit is None else dataset.select(range(min(limit, len(dataset))))


def sequence_length(requested, tokenizer, logger):
    """`--max_seq_length`, no longer than the model takes."""
    if requested > tokenizer.model_max_length:
        logger.warning(
            f"--max_seq_length {requested} is longer than the model's maximum ({tokenizer.model_max_length}); "
            f"using {tokenizer.model_max_length}."
        )
    return min(requested, tokenizer.model_max_length)
