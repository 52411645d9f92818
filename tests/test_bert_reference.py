"""transformers' own model with the same weights is the reference for everything CASAN leaves unchanged:
context_type="none" is BERT (RoBERTa, XLM-RoBERTa, ELECTRA) on every head, and a converted checkpoint starts
close to the model it came from."""

import inspect

import pytest
import torch
from tiny_models import (
    BERT_TWINS,
    CONTEXT_TYPES,
    FAMILY_TWINS,
    TINY,
    assert_outputs_close,
    comparable_outputs,
    head_inputs,
    padded_batch,
    tiny_config,
    tiny_source_config,
)
from transformers import AutoTokenizer, BertConfig, BertModel

from casan_hf import CasanForSequenceClassification, CasanModel, casan_twin
from casan_hf.context import CONTEXT_MIXER_MODULE


SENTENCES = [
    "A man is playing a guitar on the stage tonight.",
    "The new movie is awful.",
    "Context-aware self-attention lets the whole sentence shape every query and key.",
]


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("casan_class,bert_class", FAMILY_TWINS.items(), ids=[c.__name__ for c in FAMILY_TWINS])
def test_none_is_the_family_model_on_tiny_random_checkpoints(tmp_path, casan_class, bert_class, attn_implementation):
    """A checkpoint saved by transformers' own class (BertForMaskedLM, RobertaForSequenceClassification, ...)
    loads with nothing missing or left over, and gives that class's outputs and loss exactly: both classes load the
    folder, so both read the same weights in place from the same file, the same arithmetic."""
    torch.manual_seed(0)
    bert_class(tiny_source_config(casan_class.family.name, num_labels=2)).save_pretrained(tmp_path)
    if attn_implementation == "sdpa" and not casan_class._supports_sdpa:  # DeBERTa: eager only, as transformers'
        with pytest.raises(ValueError, match="scaled_dot_product_attention"):
            casan_class.from_pretrained(tmp_path, attn_implementation=attn_implementation)
        return
    casan, info = casan_class.from_pretrained(
        tmp_path, context_type="none", attn_implementation=attn_implementation, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    bert = bert_class.from_pretrained(tmp_path, attn_implementation=attn_implementation).eval()
    inputs = head_inputs(casan_class, *padded_batch([9, 5, 7]))
    with torch.no_grad():
        expected, actual = comparable_outputs(bert(**inputs)), comparable_outputs(casan.eval()(**inputs))
    assert expected.keys() == actual.keys()
    for name in expected:
        assert torch.equal(actual[name], expected[name]), name


@pytest.mark.parametrize("casan_class,bert_class", BERT_TWINS.items(), ids=[c.__name__ for c in BERT_TWINS])
def test_none_is_bert_on_real_minilm(minilm_path, casan_class, bert_class):
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    encoded = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    torch.manual_seed(0)
    bert = bert_class.from_pretrained(minilm_path, num_labels=2).eval()
    casan = casan_class.from_pretrained(minilm_path, context_type="none", num_labels=2).eval()
    # The heads BERT adds to MiniLM are random; give CASAN the same ones (every key must match), copied into its own
    # memory: other memory than BERT's, so the outputs are held to `OUTPUT_TOLERANCE`.
    casan.load_state_dict(bert.state_dict(), strict=True)
    inputs = head_inputs(casan_class, encoded["input_ids"], encoded["attention_mask"])
    with torch.no_grad():
        expected, actual = comparable_outputs(bert(**inputs)), comparable_outputs(casan(**inputs))
    assert expected.keys() == actual.keys()
    assert_outputs_close(actual, expected)


def test_only_context_parameters_are_new(minilm_path):
    model, info = CasanForSequenceClassification.from_pretrained(
        minilm_path, context_type="deep_global", num_labels=2, output_loading_info=True
    )
    new = set(info["missing_keys"])
    context = {name for name in new if f".attention.self{CONTEXT_MIXER_MODULE}" in name}
    assert context and new - context == {"classifier.weight", "classifier.bias"}
    assert not info["unexpected_keys"] and not info["mismatched_keys"]
    expected_context = {n for n, _ in model.named_parameters() if CONTEXT_MIXER_MODULE in n}
    assert context == expected_context


# What a converted MiniLM guarantees at the default gate_bias_init=-4 (gate ~ 0.018): the final hidden states
# of the real tokens stay within 0.15 (absolute) and 5% (relative Frobenius norm) of the BERT it came from.
# Measured: 0.07 / 3.5% (global), 0.05 / 2.3% (deep, deep_global).
CLOSE_ABS, CLOSE_REL = 0.15, 0.05


@pytest.mark.parametrize("context_type", CONTEXT_TYPES)
def test_converted_minilm_starts_close_to_bert(minilm_path, context_type):
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    encoded = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    real = encoded["attention_mask"].bool()
    bert = BertModel.from_pretrained(minilm_path).eval()
    torch.manual_seed(0)
    casan = CasanModel.from_pretrained(minilm_path, context_type=context_type).eval()
    with torch.no_grad():
        reference = bert(**encoded).last_hidden_state[real]
        diff = casan(**encoded).last_hidden_state[real] - reference
    assert diff.abs().max().item() <= CLOSE_ABS
    assert (diff.norm() / reference.norm()).item() <= CLOSE_REL
    assert diff.abs().max().item() > 0, "the context must change something"


def test_context_layers_left_out_attend_as_bert(tmp_path):
    """With context only in the last layer, everything before it is BERT's."""
    torch.manual_seed(0)
    BertModel(BertConfig(**TINY)).save_pretrained(tmp_path)
    bert = BertModel.from_pretrained(tmp_path).eval()
    casan = CasanModel.from_pretrained(tmp_path, context_type="global", context_layers=[2]).eval()
    input_ids, attention_mask = padded_batch([6, 4])
    with torch.no_grad():
        expected = bert(input_ids, attention_mask=attention_mask, output_hidden_states=True).hidden_states
        actual = casan(input_ids, attention_mask=attention_mask, output_hidden_states=True).hidden_states
    for layer in range(3):
        torch.testing.assert_close(actual[layer], expected[layer], atol=1e-6, rtol=0)
    assert not torch.allclose(actual[3], expected[3], atol=1e-6)


@pytest.mark.parametrize("casan_class,bert_class", BERT_TWINS.items(), ids=[c.__name__ for c in BERT_TWINS])
def test_forward_kwargs_are_typed_as_bert_s(casan_class, bert_class):
    """transformers reads what a model's forward accepts from `**kwargs: Unpack[TransformersKwargs]`."""
    casan = inspect.signature(casan_class.forward).parameters["kwargs"].annotation
    assert casan == inspect.signature(bert_class.forward).parameters["kwargs"].annotation
    assert casan is not inspect.Parameter.empty


@pytest.mark.parametrize("casan_class,bert_class", FAMILY_TWINS.items(), ids=[c.__name__ for c in FAMILY_TWINS])
def test_casan_twin_of_a_loaded_model_is_that_model_at_none(casan_class, bert_class):
    """In memory, no disk: the twin of every head of every family has its weights, and at "none" its exact
    outputs."""
    torch.manual_seed(0)
    bert = bert_class(tiny_source_config(casan_class.family.name, num_labels=2)).eval()
    inputs = head_inputs(casan_class, *padded_batch([9, 5, 7]))
    twin = casan_twin(bert, context_type="none")
    assert type(twin) is casan_class and not twin.training and twin.name_or_path == ""
    with torch.no_grad():
        expected, actual = comparable_outputs(bert(**inputs)), comparable_outputs(twin(**inputs))
    assert expected.keys() == actual.keys()
    for name in expected:
        assert torch.equal(actual[name], expected[name]), name
    context = casan_twin(bert, context_type="deep_global", context_rank=4)
    bert_weights = bert.state_dict()
    for name, tensor in context.state_dict().items():
        assert CONTEXT_MIXER_MODULE in name or torch.equal(tensor, bert_weights[name]), name


def test_casan_twin_refuses_other_models():
    with pytest.raises(
        ValueError, match="casan_twin takes one of BertModel, .*, DebertaV2ForMaskedLM; got CasanModel"
    ):
        casan_twin(CasanModel(tiny_config()))
    with pytest.raises(
        ValueError, match=r"casan_twin takes CASAN options, one of context_type, .*; got \['context_typ'\]"
    ):
        casan_twin(BertModel(BertConfig(**TINY)), context_typ="global")
