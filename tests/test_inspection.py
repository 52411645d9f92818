"""inspect_attention returns the model's own gates, attention maps, pooling hops and logits, aligned with
the tokens, for CASAN models of every context type and for plain BERT."""

import pytest
import torch
from tiny_models import TINY, tiny_config
from tiny_tokenizer import tiny_tokenizer
from transformers import BertConfig, BertForSequenceClassification, BertModel

from casan_hf import CasanForMultipleChoice, CasanForSequenceClassification, CasanModel
from casan_hf.inspection import inspect_attention, load_for_inspection


TEXT, PAIR = "The film was gripping, funny and not at all dull!", "I liked it."


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return tiny_tokenizer(tmp_path_factory.mktemp("tokenizer"))


def eager_outputs(model, tokenizer, **kwargs):
    """The model's own outputs for TEXT/PAIR, with eager attention."""
    model.set_attn_implementation("eager")
    with torch.no_grad():
        outputs = model(**tokenizer(TEXT, PAIR, return_tensors="pt"), output_attentions=True, **kwargs)
    model.set_attn_implementation("sdpa")
    return outputs


@pytest.mark.parametrize("context_type", ("global", "deep", "deep_global", "none"))
def test_gates_and_attentions_are_the_model_s_own(tokenizer, context_type):
    torch.manual_seed(0)
    model = CasanModel(tiny_config(context_type=context_type)).train()
    inspection = inspect_attention(model, tokenizer, TEXT, PAIR)

    assert model.config._attn_implementation == "sdpa" and model.training
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(TEXT, PAIR)["input_ids"])
    assert inspection.tokens == tokens and tokens[0] == "[CLS]" and "[UNK]" not in tokens
    n, layers = len(tokens), TINY["num_hidden_layers"]
    assert inspection.attentions.shape == (layers, TINY["num_attention_heads"], n, n)
    assert inspection.query_gates.shape == inspection.key_gates.shape == (layers, n)

    model.eval()
    expected = eager_outputs(model, tokenizer, output_context_gates=True)
    torch.testing.assert_close(inspection.attentions, torch.cat(expected.attentions))
    gates = torch.cat(expected.context_gates)
    torch.testing.assert_close(inspection.query_gates, gates[:, 0])
    torch.testing.assert_close(inspection.key_gates, gates[:, 1])
    torch.testing.assert_close(inspection.attentions.sum(-1), torch.ones(layers, TINY["num_attention_heads"], n))
    assert inspection.pooling_attentions is None and inspection.logits is None
    without_context = [layer for layer in range(layers) if not model.config.layer_has_context(layer)]
    assert torch.all(inspection.query_gates[without_context] == 0)
    assert torch.all(inspection.query_gates[[i for i in range(layers) if i not in without_context]] > 0)


def test_plain_bert_has_attentions_and_no_gates(tokenizer):
    torch.manual_seed(0)
    model = BertModel(BertConfig(**TINY)).eval()
    inspection = inspect_attention(model, tokenizer, TEXT)
    assert inspection.query_gates is None and inspection.key_gates is None and inspection.pooling_attentions is None
    with torch.no_grad():
        model.set_attn_implementation("eager")
        expected = model(**tokenizer(TEXT, return_tensors="pt"), output_attentions=True)
    torch.testing.assert_close(inspection.attentions, torch.cat(expected.attentions))


@pytest.mark.parametrize("model_class", (CasanForSequenceClassification, CasanForMultipleChoice))
def test_structured_pooling_hops_and_logits_are_the_model_s_own(tokenizer, model_class):
    torch.manual_seed(0)
    model = model_class(tiny_config(classifier_pooling="structured", pooling_hops=3)).eval()
    inspection = inspect_attention(model, tokenizer, TEXT, PAIR)
    inputs = tokenizer(TEXT, PAIR, return_tensors="pt")
    if model_class is CasanForMultipleChoice:
        inputs = {name: tensor[:, None] for name, tensor in inputs.items()}
    with torch.no_grad():
        expected = model(**inputs, output_pooling_attentions=True)
    torch.testing.assert_close(inspection.logits, expected.logits.reshape(-1))
    torch.testing.assert_close(inspection.pooling_attentions, expected.pooling_attentions.reshape(3, -1))
    torch.testing.assert_close(inspection.pooling_attentions.sum(-1), torch.ones(3))


def test_max_length_truncates_and_bert_classifier_loads_with_its_head(tmp_path, tokenizer):
    torch.manual_seed(0)
    BertForSequenceClassification(BertConfig(**TINY)).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    model, loaded_tokenizer = load_for_inspection(tmp_path)
    assert type(model) is BertForSequenceClassification and model.config._attn_implementation == "eager"
    inspection = inspect_attention(model, loaded_tokenizer, TEXT, PAIR, max_length=8)
    assert len(inspection.tokens) == 8 and inspection.tokens.count("[SEP]") == 2
    assert inspection.logits.shape == (2,) and inspection.query_gates is None


def test_generalized_pooling_heads_are_shown_averaged_over_the_hidden_dimensions(tokenizer):
    torch.manual_seed(0)
    model = CasanForSequenceClassification(tiny_config(classifier_pooling="generalized", pooling_hops=3)).eval()
    inspection = inspect_attention(model, tokenizer, TEXT, PAIR)
    with torch.no_grad():
        expected = model(**tokenizer(TEXT, PAIR, return_tensors="pt"), output_pooling_attentions=True)
    torch.testing.assert_close(inspection.pooling_attentions, expected.pooling_attentions[0].mean(-1))
    torch.testing.assert_close(inspection.pooling_attentions.sum(-1), torch.ones(3))
