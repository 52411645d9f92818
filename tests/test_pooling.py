"""classifier_pooling: the structured self-attentive pooling (Lin et al. 2017) and the masked mean, on the
sequence-classification and multiple-choice heads."""

import json

import pytest
import torch
from fresh_process import run_without_casan_hf
from tiny_models import TINY, assert_outputs_close, assert_same_weights, padded_batch, tiny_config
from transformers import AutoModelForSequenceClassification, BertConfig, BertForSequenceClassification

from casan_hf import CasanConfig, CasanForMultipleChoice, CasanForSequenceClassification
from casan_hf.pooling import SentencePooling, hop_penalty


LENGTHS = (7, 3, 5)
POOLINGS = ("cls", "mean", "structured")
INVALID = [
    ("classifier_pooling", "max"),
    ("classifier_pooling", None),
    ("pooling_hops", 0),
    ("pooling_hops", 2.0),
    ("pooling_hidden", -3),
    ("pooling_hidden", True),
    ("pooling_penalty", -0.5),
    ("pooling_penalty", float("inf")),
    ("pooling_penalty", "1"),
    ("pooling_attention_penalty", -1.0),
    ("pooling_output_margin", "1"),
]


def seeded(model_class, **overrides):
    torch.manual_seed(0)
    return model_class(tiny_config(**overrides)).eval()


def test_hops_are_distributions_over_real_tokens_only():
    pooling = SentencePooling(tiny_config(classifier_pooling="structured", pooling_hops=3, pooling_hidden=8))
    input_ids, attention_mask = padded_batch(LENGTHS)
    pooled, hops = pooling(torch.randn(*input_ids.shape, TINY["hidden_size"]), attention_mask)
    assert pooled.shape == (len(LENGTHS), 3 * TINY["hidden_size"])
    assert hops.shape == (len(LENGTHS), 3, max(LENGTHS))
    real = attention_mask[:, None, :].expand_as(hops).bool()
    assert torch.all(hops[~real] == 0)
    assert torch.all(hops[real] > 0)
    torch.testing.assert_close(hops.sum(-1), torch.ones(len(LENGTHS), 3))


def test_penalty_is_zero_for_orthogonal_one_hot_hops_and_positive_otherwise():
    one_hot = torch.eye(5)[[0, 3, 1]].unsqueeze(0).repeat(2, 1, 1)
    assert hop_penalty(one_hot).item() == 0
    repeated = torch.eye(5)[[0, 0, 1]].unsqueeze(0)
    assert hop_penalty(repeated).item() == pytest.approx(2.0)  # two off-diagonal ones
    uniform = torch.full((1, 3, 5), 0.2)
    # A A^T is 0.2 everywhere: 3 diagonal (0.2 - 1)^2 plus 6 off-diagonal 0.2^2.
    assert hop_penalty(uniform).item() == pytest.approx(3 * 0.64 + 6 * 0.04)


def test_penalty_joins_the_loss_only_with_labels_and_a_positive_weight():
    input_ids, attention_mask = padded_batch(LENGTHS)
    labels = torch.tensor([0, 1, 1])
    model = seeded(CasanForSequenceClassification, classifier_pooling="structured", pooling_penalty=0.5)
    with torch.no_grad():
        outputs = model(input_ids, attention_mask=attention_mask, labels=labels, output_pooling_attentions=True)
        no_labels = model(input_ids, attention_mask=attention_mask)
    cross_entropy = torch.nn.functional.cross_entropy(outputs.logits, labels)
    torch.testing.assert_close(outputs.loss, cross_entropy + 0.5 * hop_penalty(outputs.pooling_attentions))
    assert no_labels.loss is None and no_labels.pooling_attentions is None
    model.config.pooling_penalty = 0
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids, attention_mask=attention_mask, labels=labels).loss, cross_entropy)


def test_mean_pooling_is_the_masked_mean_of_the_last_layer():
    input_ids, attention_mask = padded_batch(LENGTHS)
    model = seeded(CasanForSequenceClassification, classifier_pooling="mean")
    with torch.no_grad():
        logits = model(input_ids, attention_mask=attention_mask).logits
        hidden = model.bert(input_ids, attention_mask=attention_mask).last_hidden_state
    mask = attention_mask[..., None].float()
    expected = model.classifier((hidden * mask).sum(1) / mask.sum(1))
    torch.testing.assert_close(logits, expected)


@pytest.mark.parametrize("pooling", POOLINGS)
def test_only_cls_pooling_builds_bert_s_pooler(pooling):
    names = set(seeded(CasanForSequenceClassification, classifier_pooling=pooling).state_dict())
    assert any(name.startswith("bert.pooler.") for name in names) == (pooling == "cls")
    assert any(name.startswith("pooling.") for name in names) == (pooling == "structured")
    width = TINY["hidden_size"] * (4 if pooling == "structured" else 1)
    assert seeded(CasanForMultipleChoice, classifier_pooling=pooling).classifier.in_features == width


def test_bert_classifier_checkpoint_loads_unchanged_with_cls_pooling(tmp_path):
    torch.manual_seed(0)
    bert = BertForSequenceClassification(BertConfig(**TINY, num_labels=3)).eval()
    bert.save_pretrained(tmp_path)
    casan = CasanForSequenceClassification.from_pretrained(tmp_path, context_type="none").eval()
    input_ids, attention_mask = padded_batch(LENGTHS)
    with torch.no_grad():
        torch.testing.assert_close(
            casan(input_ids, attention_mask=attention_mask).logits,
            bert(input_ids, attention_mask=attention_mask).logits,
        )


@pytest.mark.parametrize("attn_implementation", ("eager", "sdpa"))
@pytest.mark.parametrize("pooling", POOLINGS)
def test_padding_does_not_change_logits_or_hops(pooling, attn_implementation):
    input_ids, attention_mask = padded_batch(LENGTHS)
    model = seeded(CasanForSequenceClassification, classifier_pooling=pooling, context_type="deep_global")
    model.set_attn_implementation(attn_implementation)
    assert model.config._attn_implementation == attn_implementation
    with torch.no_grad():
        batch = model(input_ids, attention_mask=attention_mask, output_pooling_attentions=True)
        for row, length in enumerate(LENGTHS):
            alone = model(input_ids[row : row + 1, :length], output_pooling_attentions=True)
            torch.testing.assert_close(batch.logits[row], alone.logits[0], atol=1e-5, rtol=0)
            if pooling == "structured":
                torch.testing.assert_close(batch.pooling_attentions[row, :, :length], alone.pooling_attentions[0])


@pytest.mark.parametrize("attn_implementation", ("eager", "sdpa"))
def test_multiple_choice_structured_pooling_ignores_padding(attn_implementation):
    input_ids, attention_mask = padded_batch(LENGTHS)
    model = seeded(CasanForMultipleChoice, classifier_pooling="structured", context_type="global")
    model.set_attn_implementation(attn_implementation)
    assert model.config._attn_implementation == attn_implementation
    choices = dict(input_ids=input_ids[None], attention_mask=attention_mask[None])
    with torch.no_grad():
        batch = model(**choices, output_pooling_attentions=True)
        assert batch.pooling_attentions.shape == (1, len(LENGTHS), 4, max(LENGTHS))
        for choice, length in enumerate(LENGTHS):
            alone = model(input_ids[None, choice : choice + 1, :length])
            torch.testing.assert_close(batch.logits[0, choice], alone.logits[0, 0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("pooling", ("mean", "structured"))
def test_save_and_load_round_trip_keeps_the_weights_and_the_outputs(tmp_path, pooling):
    input_ids, attention_mask = padded_batch(LENGTHS)
    model = seeded(CasanForSequenceClassification, classifier_pooling=pooling, pooling_hops=3, pooling_hidden=16)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert type(loaded) is CasanForSequenceClassification
    assert (loaded.config.classifier_pooling, loaded.config.pooling_hops, loaded.config.pooling_hidden) == (
        pooling,
        3,
        16,
    )
    assert_same_weights(loaded, model)
    with torch.no_grad():
        expected = model(input_ids, attention_mask=attention_mask)
        actual = loaded(input_ids, attention_mask=attention_mask)
    assert_outputs_close(actual, expected)


@pytest.mark.parametrize("pooling", ["structured", "generalized"])
def test_attentive_pooling_loads_with_trust_remote_code_without_casan_hf(tmp_path, pooling):
    input_ids, attention_mask = padded_batch(LENGTHS)
    model = seeded(CasanForSequenceClassification, classifier_pooling=pooling)
    model.save_pretrained(tmp_path / "model")
    assert (tmp_path / "model" / "pooling.py").is_file()
    with torch.no_grad():
        expected = model(input_ids, attention_mask=attention_mask, output_pooling_attentions=True)
    torch.save({"input_ids": input_ids, "attention_mask": attention_mask}, tmp_path / "inputs.pt")
    run_without_casan_hf(
        """
        import torch
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained("model", trust_remote_code=True).eval()
        assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
        with torch.no_grad():
            outputs = model(**torch.load("inputs.pt"), output_pooling_attentions=True)
        torch.save({"logits": outputs.logits, "pooling_attentions": outputs.pooling_attentions}, "outputs.pt")
        """,
        tmp_path,
    )
    assert_outputs_close(torch.load(tmp_path / "outputs.pt"), expected)


@pytest.mark.parametrize("name,value", INVALID)
def test_invalid_pooling_options_are_refused_by_the_constructor(name, value):
    with pytest.raises(ValueError, match=f"`{name}`") as error:
        CasanConfig(**{name: value})
    assert repr(value) in str(error.value)


def test_allowed_poolings_are_listed():
    with pytest.raises(ValueError, match="'cls', 'mean', 'structured', 'generalized'; got 'max'"):
        CasanConfig(classifier_pooling="max")


@pytest.fixture(scope="module")
def saved_tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny")
    seeded(CasanForSequenceClassification).save_pretrained(path)
    return path


@pytest.mark.parametrize("name,value", INVALID)
def test_invalid_pooling_options_are_refused_by_from_pretrained(saved_tiny, name, value):
    with pytest.raises(ValueError, match=f"`{name}`"):
        CasanForSequenceClassification.from_pretrained(saved_tiny, **{name: value})


@pytest.mark.parametrize("name,value", [item for item in INVALID if item[1] != float("inf")])
def test_invalid_pooling_options_are_refused_from_config_json(tmp_path, saved_tiny, name, value):
    saved = json.loads((saved_tiny / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**saved, name: value}))
    with pytest.raises(ValueError, match=f"`{name}`"):
        CasanConfig.from_pretrained(tmp_path)


def test_pooling_may_change_when_a_casan_checkpoint_is_loaded(tmp_path):
    """Pooling is a head option: a CASAN checkpoint trained with "cls" starts a "structured" classifier, whose
    pooling is new and whose pooler is left unused, as transformers does for any new head."""
    seeded(CasanForSequenceClassification, classifier_pooling="cls").save_pretrained(tmp_path)
    model, info = CasanForSequenceClassification.from_pretrained(
        tmp_path, classifier_pooling="structured", ignore_mismatched_sizes=True, output_loading_info=True
    )
    assert model.config.classifier_pooling == "structured"
    assert {"pooling.hidden.weight", "pooling.hops.weight"} <= set(info["missing_keys"])
    assert {name for name in info["unexpected_keys"]} == {"bert.pooler.dense.weight", "bert.pooler.dense.bias"}


def generalized(**overrides):
    return SentencePooling(
        tiny_config(classifier_pooling="generalized", pooling_hops=3, pooling_hidden=8, **overrides)
    )


def test_generalized_heads_weigh_every_dimension_over_the_real_tokens_only():
    torch.manual_seed(0)
    pooling = generalized()
    input_ids, attention_mask = padded_batch(LENGTHS)
    hidden = torch.randn(*input_ids.shape, TINY["hidden_size"])
    pooled, attention = pooling(hidden, attention_mask)
    assert pooled.shape == (len(LENGTHS), 3 * TINY["hidden_size"]) and pooling.output_size == pooled.shape[1]
    assert attention.shape == (len(LENGTHS), 3, max(LENGTHS), TINY["hidden_size"])
    real = attention_mask[:, None, :, None].expand_as(attention).bool()
    assert torch.all(attention[~real] == 0) and torch.all(attention[real] > 0)
    torch.testing.assert_close(attention.sum(2), torch.ones(len(LENGTHS), 3, TINY["hidden_size"]))
    # The paper's formula, head by head: A^i = softmax_t(W_2^i ReLU(W_1^i h_t + b_1^i) + b_2^i), v^i = sum_t a_t h_t.
    for row, length in enumerate(LENGTHS):
        tokens = hidden[row, :length]
        for i, head in enumerate(pooling.heads):
            w1 = pooling.hidden.weight[i * 8 : (i + 1) * 8]
            b1 = pooling.hidden.bias[i * 8 : (i + 1) * 8]
            weights = torch.softmax(torch.relu(tokens @ w1.T + b1) @ head.weight.T + head.bias, dim=0)
            torch.testing.assert_close(attention[row, i, :length], weights)
            torch.testing.assert_close(pooled[row, i * 32 : (i + 1) * 32], (weights * tokens).sum(0))


@pytest.mark.parametrize("penalty", ["parameter", "attention", "output"])
def test_each_generalized_penalty_is_the_hinge_over_pairs_of_heads(penalty):
    """Against a hand computation: sum over pairs i < j of max(margin - distance_ij, 0), times the weight."""
    input_ids, attention_mask = padded_batch(LENGTHS)
    labels = torch.tensor([0, 1, 1])
    options = {"classifier_pooling": "generalized", "pooling_hops": 3, "pooling_hidden": 8}
    model = seeded(CasanForSequenceClassification, **options, **{f"pooling_{penalty}_margin": 50.0})
    with torch.no_grad():
        plain = model(input_ids, attention_mask=attention_mask, labels=labels, output_pooling_attentions=True)
        model.config.update({f"pooling_{penalty}_penalty": 0.5})
        penalised = model(input_ids, attention_mask=attention_mask, labels=labels).loss
        hidden = model.bert(input_ids, attention_mask=attention_mask).last_hidden_state
    _, attention = model.pooling(hidden, attention_mask)
    vectors = (attention * hidden[:, None]).sum(2)  # (batch, heads, d)
    weights = model.pooling.hidden.weight.unflatten(0, (3, 8))
    hinge = 0.0
    for i in range(3):
        for j in range(i + 1, 3):
            distance = {
                "parameter": (weights[i] - weights[j]).pow(2).sum(),
                "attention": (attention[:, i] - attention[:, j]).pow(2).sum(dim=(1, 2)).mean(),
                "output": (vectors[:, i] - vectors[:, j]).pow(2).sum(-1).mean(),
            }[penalty]
            hinge += max(50.0 - float(distance), 0.0)
    assert hinge > 0
    torch.testing.assert_close(penalised, plain.loss + 0.5 * hinge, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attn_implementation", ("eager", "sdpa"))
def test_generalized_pooling_ignores_padding(attn_implementation):
    input_ids, attention_mask = padded_batch(LENGTHS)
    model = seeded(CasanForSequenceClassification, classifier_pooling="generalized", context_type="deep_global")
    model.set_attn_implementation(attn_implementation)
    with torch.no_grad():
        batch = model(input_ids, attention_mask=attention_mask, output_pooling_attentions=True)
        for row, length in enumerate(LENGTHS):
            alone = model(input_ids[row : row + 1, :length], output_pooling_attentions=True)
            torch.testing.assert_close(batch.logits[row], alone.logits[0], atol=1e-5, rtol=0)
            torch.testing.assert_close(batch.pooling_attentions[row, :, :length], alone.pooling_attentions[0])
