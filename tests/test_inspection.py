"""inspect_attention returns the model's own gates, attention maps, pooling hops and logits, aligned with
the tokens, for CASAN models of every context type and for plain BERT, and for saved causal LMs (Llama, GPT-2: their
attention lower-triangular); predict reads every head's logits as its pipeline would (a causal LM's: the next token
after the text); load_for_inspection refuses other model types and heads by name."""

import re

import pytest
import torch
from tiny_models import TINY, tiny_causal_config, tiny_config
from tiny_tokenizer import tiny_tokenizer
from transformers import BertConfig, BertForSequenceClassification, BertModel, GPT2Config, T5Config

from casan_hf import (
    CasanForMaskedLM,
    CasanForMultipleChoice,
    CasanForQuestionAnswering,
    CasanForSequenceClassification,
    CasanForTokenClassification,
    CasanModel,
    casan_class,
)
from casan_hf.inspection import inspect_attention, load_for_inspection, predict


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


def inspected(model, tokenizer, text=TEXT, pair=PAIR):
    return inspect_attention(model.eval(), tokenizer, text, pair)


def test_sequence_classification_predicts_each_label_s_probability(tokenizer):
    torch.manual_seed(0)
    model = CasanForSequenceClassification(tiny_config(num_labels=3, id2label={0: "neg", 1: "neutral", 2: "pos"}))
    inspection = inspected(model, tokenizer)
    prediction = predict(model, tokenizer, inspection)
    probabilities = inspection.logits.softmax(-1)
    best = int(probabilities.argmax())
    assert prediction.rows[0] == (model.config.id2label[best], pytest.approx(float(probabilities[best])))
    assert sorted(label for label, _ in prediction.rows) == ["neg", "neutral", "pos"]
    assert sum(p for _, p in prediction.rows) == pytest.approx(1.0)
    assert prediction.summary == f"predicts {model.config.id2label[best]} ({float(probabilities[best]):.2f})"


def test_regression_and_multi_label_read_the_logits_as_their_problem_type(tokenizer):
    torch.manual_seed(0)
    model = CasanForSequenceClassification(tiny_config(num_labels=1))
    inspection = inspected(model, tokenizer)
    assert predict(model, tokenizer, inspection).rows == [("regression", pytest.approx(float(inspection.logits[0])))]
    model = CasanForSequenceClassification(tiny_config(num_labels=4, problem_type="multi_label_classification"))
    inspection = inspected(model, tokenizer)
    rows = dict(predict(model, tokenizer, inspection).rows)
    assert rows == {f"LABEL_{i}": pytest.approx(float(inspection.logits[i].sigmoid())) for i in range(4)}


def test_token_classification_tags_every_text_token(tokenizer):
    torch.manual_seed(0)
    model = CasanForTokenClassification(tiny_config(num_labels=3, id2label={0: "O", 1: "B-X", 2: "I-X"}))
    inspection = inspected(model, tokenizer)
    prediction = predict(model, tokenizer, inspection)
    assert inspection.logits.shape == (len(inspection.tokens), 3)
    text_positions = [i for i, token in enumerate(inspection.tokens) if token not in ("[CLS]", "[SEP]")]
    assert [row[0] for row in prediction.rows] == [inspection.tokens[i] for i in text_positions]
    tags = [model.config.id2label[int(inspection.logits[i].argmax())] for i in text_positions]
    assert [row[1] for row in prediction.rows] == tags


def test_question_answering_finds_the_best_span_in_the_context(tokenizer):
    torch.manual_seed(0)
    model = CasanForQuestionAnswering(tiny_config())
    inspection = inspected(model, tokenizer, "was the film funny ?", TEXT)
    prediction = predict(model, tokenizer, inspection)
    context = [i for i, sequence in enumerate(inspection.sequence_ids) if sequence == 1]
    start, end = (inspection.logits[context, column].softmax(-1) for column in (0, 1))
    brute = max(
        (float(start[a] * end[b]), context[a], context[b])
        for a in range(len(context))
        for b in range(a, min(len(context), a + 30))
    )
    answer, first, last, probability = prediction.rows[0]
    assert (probability, first, last) == (pytest.approx(brute[0]), brute[1], brute[2])
    assert answer == tokenizer.convert_tokens_to_string(inspection.tokens[first : last + 1])
    assert len(prediction.rows) == 5 and all(row[3] <= probability for row in prediction.rows)


def test_masked_lm_fills_each_mask_with_its_top_tokens(tokenizer):
    torch.manual_seed(0)
    model = CasanForMaskedLM(tiny_config())
    inspection = inspected(model, tokenizer, "the film was [MASK] and [MASK] .", None)
    prediction = predict(model, tokenizer, inspection, top_k=3)
    masks = [i for i, token in enumerate(inspection.tokens) if token == "[MASK]"]
    expected = []
    for position in masks:
        top = inspection.logits[position].softmax(-1).topk(3)
        tokens = tokenizer.convert_ids_to_tokens(top.indices.tolist())
        expected += [(position, token, pytest.approx(float(p))) for token, p in zip(tokens, top.values, strict=True)]
    assert len(masks) == 2 and prediction.rows == expected
    assert "put [MASK] in the text" in predict(model, tokenizer, inspected(model, tokenizer)).summary


def test_multiple_choice_scores_the_text_and_an_encoder_predicts_nothing(tokenizer):
    torch.manual_seed(0)
    model = CasanForMultipleChoice(tiny_config())
    inspection = inspected(model, tokenizer)
    assert predict(model, tokenizer, inspection).rows == [("this text", pytest.approx(float(inspection.logits[0])))]
    encoder = CasanModel(tiny_config())
    assert predict(encoder, tokenizer, inspected(encoder, tokenizer)).summary.startswith("no prediction")


def saved_causal(folder, family, head, **options):
    """A tiny random CASAN causal model of `family` and `head` with its context open (`deep_global`, the authors' gate
    start), saved to `folder` with the tiny tokenizer (without token types, as the family's give none) and a
    vocabulary of the tokenizer's size; returns the model, in eval mode."""
    tokenizer = tiny_tokenizer(folder, token_types=False)
    torch.manual_seed(0)
    config = tiny_causal_config(
        family, vocab_size=len(tokenizer), context_type="deep_global", gate_bias_init=0.0, **options
    )
    model = casan_class(family, head)(config).eval()
    model.save_pretrained(folder)
    return model


@pytest.mark.parametrize("family,gate_per_head", [("llama", False), ("gpt2", True)])
def test_a_causal_lm_s_attention_is_lower_triangular_its_gates_its_own_and_it_predicts_the_next_token(
    tmp_path, family, gate_per_head
):
    """A saved causal LM loads with its head and eager attention; each token attends to itself and the tokens before it
    alone, each row summing to 1; the gates are its forward's (the heads' mean with `gate_per_head`); the prediction is
    the top 5 next tokens after the text's last token (the tokenizer's closing [SEP] left out)."""
    model = saved_causal(tmp_path, family, "causal-lm", gate_per_head=gate_per_head)
    loaded, tokenizer = load_for_inspection(tmp_path)
    assert type(loaded) is casan_class(family, "causal-lm") and loaded.config._attn_implementation == "eager"
    inspection = inspect_attention(loaded, tokenizer, TEXT)

    inputs = tokenizer(TEXT, return_tensors="pt")
    tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0].tolist())
    n, heads = len(tokens), model.config.num_attention_heads
    assert inspection.tokens == tokens and tokens[-1] == "[SEP]"
    attentions = inspection.attentions
    assert attentions.shape == (3, heads, n, n) and torch.equal(attentions, attentions.tril())
    assert (attentions.diagonal(dim1=-2, dim2=-1) > 0).all()
    torch.testing.assert_close(attentions.sum(-1), torch.ones(3, heads, n))

    model.set_attn_implementation("eager")
    with torch.no_grad():
        expected = model(**inputs, output_attentions=True, output_context_gates=True)
    torch.testing.assert_close(attentions, torch.cat(expected.attentions))
    gates = torch.cat(expected.context_gates)
    assert gates.dim() == (4 if gate_per_head else 3)
    gates = gates.mean(2) if gate_per_head else gates
    torch.testing.assert_close(inspection.query_gates, gates[:, 0])
    torch.testing.assert_close(inspection.key_gates, gates[:, 1])
    assert inspection.layers_with_context == [True, True, True]
    torch.testing.assert_close(inspection.logits, expected.logits[0])

    prediction = predict(loaded, tokenizer, inspection)
    top = expected.logits[0, n - 2].softmax(-1).topk(5)  # after "!", the text's last token
    rows = [(tokenizer.decode([i]), float(p)) for i, p in zip(top.indices.tolist(), top.values, strict=True)]
    assert prediction.rows == [(token, pytest.approx(p)) for token, p in rows]
    assert prediction.summary == "next token " + ", ".join(f"{token!r} ({p:.2f})" for token, p in rows)


def test_a_causal_classifier_predicts_its_labels_and_a_bare_decoder_nothing(tmp_path):
    """A causal sequence classifier's logits are its forward's on the last real token, read as the encoders' are."""
    id2label = {0: "neg", 1: "neutral", 2: "pos"}
    model = saved_causal(tmp_path, "llama", "sequence-classification", num_labels=3, id2label=id2label)
    loaded, tokenizer = load_for_inspection(tmp_path)
    inspection = inspect_attention(loaded, tokenizer, TEXT, PAIR)
    with torch.no_grad():
        expected = model(**tokenizer(TEXT, PAIR, return_tensors="pt")).logits[0]
    torch.testing.assert_close(inspection.logits, expected)
    probabilities = expected.softmax(-1)
    best = int(probabilities.argmax())
    assert predict(loaded, tokenizer, inspection).summary == f"predicts {id2label[best]} ({probabilities[best]:.2f})"
    decoder = casan_class("gpt2", "base")(tiny_causal_config("gpt2", vocab_size=len(tokenizer))).eval()
    summary = predict(decoder, tokenizer, inspect_attention(decoder, tokenizer, TEXT)).summary
    assert summary == "no prediction: CasanGPT2Model is a bare model, without a head"


@pytest.mark.parametrize(
    "config,message",
    [
        (T5Config(num_layers=1, d_model=8, num_heads=2), "Checkpoint has model_type 't5'; CASAN models load 'bert'"),
        (
            GPT2Config(n_layer=1, n_embd=8, n_head=2, architectures=["GPT2DoubleHeadsModel"]),
            "'GPT2DoubleHeadsModel' is not a head that can be inspected; a gpt2 checkpoint can be one of "
            "CasanGPT2Model, GPT2Model, CasanGPT2ForCausalLM, GPT2LMHeadModel, CasanGPT2ForSequenceClassification, "
            "GPT2ForSequenceClassification.",
        ),
        (
            BertConfig(**TINY, architectures=["BertForPreTraining"]),
            "'BertForPreTraining' is not a head that can be inspected; a bert checkpoint can be one of CasanModel, "
            "BertModel, CasanForSequenceClassification",
        ),
    ],
)
def test_other_models_and_heads_are_refused_before_weights_are_read(tmp_path, config, message):
    config.save_pretrained(tmp_path)  # a config alone: the refusal must come before any weights are looked for
    with pytest.raises(ValueError, match=re.escape(message)):
        load_for_inspection(tmp_path)


def test_local_windows_are_the_model_s_own_for_each_layer_with_the_bias(tokenizer):
    torch.manual_seed(0)
    model = CasanModel(tiny_config(context_type="none", local_bias="query", local_layers=[0, 2])).eval()
    inspection = inspect_attention(model, tokenizer, TEXT, PAIR)
    expected = eager_outputs(model, tokenizer, output_local_windows=True).local_windows
    assert sorted(inspection.local_windows) == [0, 2]
    for layer, windows in zip([0, 2], expected, strict=True):
        torch.testing.assert_close(inspection.local_windows[layer], windows[0])
    centres, widths = inspection.local_windows[0][:, 1]
    weights = inspection.local_weights(0, 1)
    n = len(inspection.tokens)
    assert weights.shape == (n, n) and inspection.local_weights(1, 0) is None
    row = 3
    torch.testing.assert_close(weights[row], torch.exp(-2 * (torch.arange(n) - centres[row]) ** 2 / widths[row] ** 2))
    assert inspect_attention(CasanModel(tiny_config()).eval(), tokenizer, TEXT).local_windows == {}
