"""Tiny random configurations and inputs shared by the model tests."""

import torch
import transformers

from casan_hf import (
    FAMILIES,
    FAMILY_CONFIGS,
    HEADS,
    casan_class,
    get_family,
)
from casan_hf.context import CONTEXT_KINDS


TINY = dict(
    vocab_size=99,
    hidden_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    intermediate_size=37,
    max_position_embeddings=64,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
# The context types with context (every kind but "none", which runs the source model's numbers).
CONTEXT_TYPES = tuple(name for name, kind in CONTEXT_KINDS.items() if kind.gives_context)

# CASAN class -> the transformers class with the same weights and outputs when context_type="none", for every
# family and head; BERT_TWINS for BERT's alone.
FAMILY_TWINS = {
    casan_class(family, head.name): getattr(transformers, family.source_class_name(head))
    for family in FAMILIES
    for head in HEADS
}
BERT_TWINS = {casan: source for casan, source in FAMILY_TWINS.items() if casan.family.name == "bert"}


def attention_implementations(model_class):
    """The attention backends a CASAN class runs: eager and sdpa, or eager alone where its source family has no
    sdpa (DeBERTa-v2, whose CASAN classes refuse it as transformers' do)."""
    return ("eager", "sdpa") if model_class._supports_sdpa else ("eager",)


def tiny_config(family="bert", **overrides):
    """The family's CASAN config of the tiny size, with what its row's `tiny_config` adds."""
    return FAMILY_CONFIGS[family](**{**TINY, **get_family(family).tiny_config, **overrides})


def tiny_source_config(family, **overrides):
    """The family's own transformers config (`RobertaConfig`, ...) of the same tiny size."""
    family = get_family(family)
    config_class = getattr(transformers, f"{family.transformers_prefix}Config")
    return config_class(**{**TINY, **family.tiny_config, **overrides})


# The causal families' tiny configs (`tiny_causal_source_config`): grouped-query attention (4 query heads, 2 key-value
# heads) where the family has it, and a head width of its own for Qwen3 (head_dim 12, not 32 / 4).
CAUSAL_VOCAB = 40
CAUSAL_SIZES = {
    "llama": dict(hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2),
    "qwen2": dict(hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2),
    "qwen3": dict(hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=12),
    "gpt2": dict(n_embd=32, n_head=4, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0),
}


def tiny_causal_source_config(family, **overrides):
    """The tiny transformers config of causal `family` (`LlamaConfig`, ...): 3 layers, a vocabulary of `CAUSAL_VOCAB`,
    padding id 0."""
    config_class = transformers.AutoConfig.for_model(family).__class__
    common = dict(vocab_size=CAUSAL_VOCAB, num_hidden_layers=3, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    if family != "gpt2":
        common["max_position_embeddings"] = 64
    return config_class(**{**common, **CAUSAL_SIZES[family], **overrides})


def tiny_causal_config(family, **options):
    """The CASAN config of causal `family` at `tiny_causal_source_config`'s size, with the context `options`."""
    return FAMILY_CONFIGS[family](**tiny_causal_source_config(family).to_dict() | options)


def padded_batch(lengths, vocab_size=99, seed=0, pad_token_id=0):
    """Random sentences of the given lengths, right-padded: (input_ids, attention_mask)."""
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    input_ids = torch.full((len(lengths), width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, length in enumerate(lengths):
        input_ids[row, :length] = torch.randint(1, vocab_size, (length,), generator=generator)
        attention_mask[row, :length] = 1
    return input_ids, attention_mask


def head_inputs(casan_class, input_ids, attention_mask, num_labels=2):
    """Inputs (with labels, so the loss is compared too) for one head."""
    batch = input_ids.shape[0]
    # The translation model has no row of HEADS.
    head = casan_class.casan_head.name if hasattr(casan_class, "casan_head") else None
    if head == "multiple-choice":
        # Choice 2 of each example is the next example's sentence.
        return {
            "input_ids": torch.stack([input_ids, input_ids.roll(1, dims=0)], dim=1),
            "attention_mask": torch.stack([attention_mask, attention_mask.roll(1, dims=0)], dim=1),
            "labels": torch.arange(batch) % 2,
        }
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    if head == "sequence-classification":
        inputs["labels"] = torch.arange(batch) % num_labels
    elif head == "token-classification":
        inputs["labels"] = (input_ids % num_labels).masked_fill(attention_mask == 0, -100)
    elif head == "question-answering":
        inputs["start_positions"] = torch.zeros(batch, dtype=torch.long)
        inputs["end_positions"] = torch.ones(batch, dtype=torch.long)
    elif head == "masked-lm":
        inputs["labels"] = input_ids.masked_fill(attention_mask == 0, -100)
    return inputs


def comparable_outputs(outputs):
    """The tensors of a model output that must agree between two implementations."""
    names = ("loss", "logits", "start_logits", "end_logits", "last_hidden_state", "pooler_output")
    return {name: outputs[name] for name in names if name in outputs and outputs[name] is not None}


def gradients_without_and_with_checkpointing(model, inputs, checkpointing_kwargs=None):
    """The gradients of `model`'s loss on `inputs` by parameter name, first as the model is, then after
    `activation_checkpointing_enable(checkpointing_kwargs)`: a pair that checkpointing must leave equal."""

    def gradients():
        model.zero_grad()
        model(**inputs).loss.backward()
        return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    plain = gradients()
    model.activation_checkpointing_enable(checkpointing_kwargs)
    return plain, gradients()


def assert_same_gradients(plain, checkpointed):
    """Checkpointing computed the same gradients for the same parameters (up to float32's order of summation)."""
    assert plain.keys() == checkpointed.keys()
    for name in plain:
        torch.testing.assert_close(checkpointed[name], plain[name], atol=1e-6, rtol=1e-5, msg=name)


# Outputs of the same weights on the same inputs agree to the bit only where the same kernels run on memory laid out
# alike. A model loaded from a folder reads its weights in place from the memory-mapped safetensors file, at
# addresses that are not 64-byte aligned, where MKL's matrix products take other vector paths and round differently
# (a multiple-choice loss 6e-8 off, seen with MKL's AVX2 kernels); a fresh process, another implementation of the
# same arithmetic (transformers 4 against 5) or another CPU may run other kernels too. There the weights are compared
# exactly and the outputs to OUTPUT_TOLERANCE: a few float32 rounding steps of outputs of order 1, far below what a
# changed computation moves them (the context at the default gate moves a converted model by about 1%).
# docs/TESTS.md, "Exact and close comparisons", states the rule.
OUTPUT_TOLERANCE = dict(rtol=1e-6, atol=1e-6)


def assert_same_weights(actual, expected):
    """Two state dicts (or models) hold the same tensors, bit for bit: what a save and a load must keep exactly."""
    actual, expected = (
        weights.state_dict() if isinstance(weights, torch.nn.Module) else weights for weights in (actual, expected)
    )
    assert actual.keys() == expected.keys(), sorted(actual.keys() ^ expected.keys())
    for name, tensor in expected.items():
        assert torch.equal(actual[name], tensor), name


def assert_outputs_close(actual, expected, where=""):
    """Every output of `expected` (name -> tensor) in `actual`, to OUTPUT_TOLERANCE: the outputs of the same weights
    computed by other kernels or from memory laid out otherwise."""
    assert actual.keys() >= expected.keys(), sorted(expected.keys() - actual.keys())
    for name, tensor in expected.items():
        torch.testing.assert_close(
            actual[name], tensor, **OUTPUT_TOLERANCE, msg=lambda message, name=name: f"{where} {name}: {message}"
        )
