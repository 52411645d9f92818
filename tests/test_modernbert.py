"""ModernBERT as a CASAN family: its config, where the context meets its attention (docs/FAMILIES.md, "ModernBERT"),
what it keeps of transformers' ModernBERT beyond the generic reference tests (the heads' poolings, left padding,
sparse prediction), and the transformers releases its folders load with.

The generic tests take the family from `FAMILIES`: none == transformers for every head, eager and sdpa
(test_bert_reference.py), padding invariance for every context kind (test_context.py), every head through remote
code (test_remote_code.py), compile (test_compile.py), the FSDP2 plan and device_map (test_scaling.py)."""

import dataclasses

import pytest
import torch
import transformers
from fresh_process import run_without_casan_hf
from test_transformers4 import python_4x
from tiny_models import (
    CONTEXT_TYPES,
    assert_outputs_close,
    assert_same_gradients,
    assert_same_weights,
    gradients_without_and_with_checkpointing,
    head_inputs,
    padded_batch,
    tiny_config,
    tiny_source_config,
)

from casan_hf import (
    CasanConfig,
    CasanModernBertConfig,
    CasanModernBertForMaskedLM,
    CasanModernBertForMultipleChoice,
    CasanModernBertForSequenceClassification,
    CasanModernBertModel,
    casan_twin,
)
from casan_hf.configuration_casan_modernbert import MINIMUM_TRANSFORMERS_MODERNBERT
from casan_hf.context import masked_mean
from casan_hf.options import OPTIONS


def options_of(config_class):
    fields = {field.name: field for field in dataclasses.fields(config_class)}
    return {
        option.name: (
            fields[option.name].type,
            fields[option.name].default_factory()
            if fields[option.name].default_factory is not dataclasses.MISSING
            else fields[option.name].default,
        )
        for option in OPTIONS
    }


def test_the_config_declares_every_option_as_casan_config_does():
    assert options_of(CasanModernBertConfig) == options_of(CasanConfig)


def test_classifier_pooling_is_modernbert_s_field_with_casan_s_values():
    """ModernBERT's "cls" and "mean" and CASAN's attentive poolings, checked by CASAN's check; a ModernBERT
    config.json loads with its own value."""
    for pooling in ("cls", "mean", "structured", "generalized"):
        assert tiny_config("modernbert", classifier_pooling=pooling).classifier_pooling == pooling
    with pytest.raises(ValueError, match="`classifier_pooling` must be one of 'cls', 'mean', 'structured'"):
        tiny_config("modernbert", classifier_pooling="max")
    source = tiny_source_config("modernbert", classifier_pooling="mean")
    converted = CasanModernBertConfig.from_dict(source.to_dict())
    assert converted.classifier_pooling == "mean" and converted.model_type == "casan_modernbert"
    assert converted.layer_types == source.layer_types and converted.rope_parameters == source.rope_parameters
    with pytest.raises(ValueError, match="`context_rank` has no effect with context_type='none'"):
        tiny_config("modernbert", context_type="none", context_rank=4)


def layer_inputs_and_contexts(model, input_ids, attention_mask):
    """Each layer's input and the context it was given, as its forward received them."""
    seen = []
    hooks = [
        layer.register_forward_pre_hook(lambda module, args: seen.append((args[0], args[2:])))
        for layer in model.layers
    ]
    with torch.no_grad():
        model(input_ids, attention_mask=attention_mask)
    for hook in hooks:
        hook.remove()
    return seen


@pytest.mark.parametrize("context_type", CONTEXT_TYPES)
def test_the_context_is_the_residual_stream_entering_each_layer_and_global_over_the_whole_sentence(context_type):
    """A layer's context source is its input, before its `attn_norm` (the paper's H^{l-1}); global and deep_global
    average it over every real token, in the sliding-window layers (1 and 2, window of 4 tokens) too; deep reads
    the inputs of the earlier layers position by position."""
    torch.manual_seed(0)
    model = CasanModernBertModel(tiny_config("modernbert", context_type=context_type)).eval()
    assert model.config.layer_types == ["full_attention", "sliding_attention", "sliding_attention"]
    input_ids, attention_mask = padded_batch([9, 6])
    seen = layer_inputs_and_contexts(model, input_ids, attention_mask)
    inputs = [layer_input for layer_input, _ in seen]
    means = [masked_mean(layer_input, attention_mask) for layer_input in inputs]
    for layer, (_, context) in enumerate(seen):
        if context_type == "global":
            expected = (means[layer],)
        elif context_type == "deep_global":
            expected = (torch.cat(means[: layer + 1], dim=-1),)
        else:
            expected = tuple(inputs[:layer])
        assert len(context) == len(expected)
        for actual, wanted in zip(context, expected, strict=True):
            torch.testing.assert_close(actual, wanted, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("context_type", CONTEXT_TYPES)
def test_the_context_is_mixed_before_the_rotary_embedding_so_attention_stays_relative(context_type):
    """Shifting every position leaves a rotary model's outputs as they are (q.k depends on relative positions only).
    Mixed into Q and K before their rotation, the context keeps that; a context vector added after the rotation
    would meet each query at an angle set by its absolute position, and the outputs would move."""
    torch.manual_seed(0)
    config = tiny_config("modernbert", context_type=context_type, gate_bias_init=0.0, context_init_range=0.5)
    model = CasanModernBertModel(config).eval()
    input_ids, attention_mask = padded_batch([9, 6])
    positions = torch.arange(9)[None]
    with torch.no_grad():
        plain = model(input_ids, attention_mask=attention_mask, position_ids=positions, output_context_gates=True)
        shifted = model(input_ids, attention_mask=attention_mask, position_ids=positions + 37)
        gates = torch.stack(plain.context_gates)
    assert gates[1:].abs().max() > 0.1, "the context must take part"
    real = attention_mask.bool()
    difference = (shifted.last_hidden_state - plain.last_hidden_state)[real].abs().max().item()
    assert difference < 1e-4, difference


def test_mean_pooling_and_left_padded_multiple_choice_are_modernbert_s():
    """ModernBERT's own "mean" pooling in both pooling heads, and its multiple choice's "cls" vector: the first real
    token, so that left padding gives what ModernBERT gives. Exactly: the mean is ModernBERT's arithmetic."""
    torch.manual_seed(0)
    input_ids, attention_mask = padded_batch([7, 4, 6])
    left_ids, left_mask = input_ids.flip(1), attention_mask.flip(1)
    for pooling in ("mean", "cls"):
        for source_class in (
            transformers.ModernBertForSequenceClassification,
            transformers.ModernBertForMultipleChoice,
        ):
            source = source_class(tiny_source_config("modernbert", classifier_pooling=pooling, num_labels=2)).eval()
            twin = casan_twin(source, context_type="none")
            for ids, mask in ((input_ids, attention_mask), (left_ids, left_mask)):
                inputs = head_inputs(type(twin), ids, mask)
                with torch.no_grad():
                    expected, actual = source(**inputs), twin(**inputs)
                assert torch.equal(actual.logits, expected.logits) and torch.equal(actual.loss, expected.loss)


def test_sparse_prediction_predicts_the_masked_tokens_only():
    torch.manual_seed(0)
    source = transformers.ModernBertForMaskedLM(tiny_source_config("modernbert", sparse_prediction=True)).eval()
    twin = casan_twin(source, context_type="none")
    input_ids, attention_mask = padded_batch([7, 4])
    labels = torch.full_like(input_ids, -100)
    labels[:, 1] = input_ids[:, 1]
    with torch.no_grad():
        expected = source(input_ids, attention_mask=attention_mask, labels=labels)
        actual = twin(input_ids, attention_mask=attention_mask, labels=labels)
    assert actual.logits.shape == (2, source.config.vocab_size)
    assert torch.equal(actual.logits, expected.logits) and torch.equal(actual.loss, expected.loss)


def test_attentive_pooling_widens_the_prediction_head(tmp_path):
    config = tiny_config("modernbert", classifier_pooling="structured", pooling_hops=3, pooling_hidden=8, num_labels=2)
    for model_class in (CasanModernBertForSequenceClassification, CasanModernBertForMultipleChoice):
        model = model_class(config).eval()
        assert model.head.dense.in_features == 3 * config.hidden_size
        inputs = head_inputs(model_class, *padded_batch([6, 3]))
        outputs = model(**inputs, output_pooling_attentions=True)
        assert outputs.loss.isfinite() and outputs.pooling_attentions.shape[-2:] == (3, 6)


def test_token_type_ids_are_refused_by_name_since_modernbert_has_none():
    model = CasanModernBertForSequenceClassification(tiny_config("modernbert")).eval()
    input_ids, attention_mask = padded_batch([5, 3])
    with pytest.raises(ValueError, match="The modernbert family has no token types: pass token_type_ids=None"):
        model(input_ids, attention_mask=attention_mask, token_type_ids=torch.zeros_like(input_ids))
    assert model(input_ids, attention_mask=attention_mask, token_type_ids=None).logits.shape == (2, 2)


def test_the_head_row_on_the_class_and_the_prediction_head_on_the_model():
    model = CasanModernBertForMaskedLM(tiny_config("modernbert"))
    assert CasanModernBertForMaskedLM.casan_head.name == "masked-lm"
    assert not hasattr(CasanModernBertForMaskedLM, "head")  # the module's name alone, on the model
    assert model.head is model.get_submodule("head") and type(model.head).__name__ == "ModernBertPredictionHead"
    assert model.decoder.weight is model.model.embeddings.tok_embeddings.weight


def test_a_modernbert_checkpoint_converts_and_the_casan_folder_reloads(tmp_path):
    torch.manual_seed(0)
    transformers.ModernBertForMaskedLM(tiny_source_config("modernbert")).save_pretrained(tmp_path / "source")
    model, info = CasanModernBertForMaskedLM.from_pretrained(
        tmp_path / "source", context_type="deep_global", gate_bias_init=0.0, output_loading_info=True
    )
    assert info["missing_keys"] and all(".attn.context_mixer." in key for key in info["missing_keys"])
    assert not info["unexpected_keys"] and not info["mismatched_keys"] and model.name_or_path == ""
    model.save_pretrained(tmp_path / "casan")
    reloaded = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "casan").eval()
    assert type(reloaded) is CasanModernBertForMaskedLM
    assert_same_weights(reloaded, model)
    inputs = head_inputs(CasanModernBertForMaskedLM, *padded_batch([6, 3]))
    with torch.no_grad():
        assert_outputs_close(reloaded(**inputs), model.eval()(**inputs))
    with pytest.raises(ValueError, match="trained with context_type='deep_global'"):
        CasanModernBertForMaskedLM.from_pretrained(tmp_path / "casan", context_type="global")
    saved = {path.name for path in (tmp_path / "casan").glob("*.py")}
    assert {"configuration_casan_modernbert.py", "modeling_casan_modernbert.py", "modeling_casan.py"} <= saved


@pytest.mark.parametrize("use_reentrant", [False, True], ids=["non-reentrant", "reentrant"])
@pytest.mark.parametrize("context_type", ["deep", "deep_global"])
def test_gradient_checkpointing_gives_the_same_gradients(context_type, use_reentrant):
    torch.manual_seed(0)
    model = CasanModernBertForSequenceClassification(
        tiny_config("modernbert", context_type=context_type, num_labels=2, gate_bias_init=0.0)
    ).train()
    input_ids, attention_mask = padded_batch([6, 4, 2])
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 1, 1]))
    plain, checkpointed = gradients_without_and_with_checkpointing(model, inputs, {"use_reentrant": use_reentrant})
    assert_same_gradients(plain, checkpointed)
    assert any("context_mixer" in name for name in plain)


def test_bf16_autocast_matches_fp32():
    torch.manual_seed(0)
    model = CasanModernBertModel(tiny_config("modernbert", context_type="deep_global", gate_bias_init=0.0)).eval()
    input_ids, attention_mask = padded_batch([6, 3])
    with torch.no_grad():
        expected = model(input_ids, attention_mask=attention_mask).last_hidden_state
        with torch.autocast("cpu", dtype=torch.bfloat16):
            actual = model(input_ids, attention_mask=attention_mask).last_hidden_state
    real = attention_mask.bool()
    assert (actual.float() - expected)[real].abs().max() < 0.1


TOO_OLD = """
import transformers
try:
    transformers.AutoConfig.from_pretrained("model", trust_remote_code=True)
except ImportError as error:
    print(error)
else:
    raise SystemExit("transformers " + transformers.__version__ + " loaded the folder")
"""


def test_transformers_4_refuses_a_modernbert_folder_with_the_minimum_version(tmp_path):
    """transformers 4.x has another ModernBERT (unpadded inputs, one rotary theta per attention kind): its folders
    stop at the config with the minimum named, while BERT folders still load there (test_transformers4.py)."""
    python = python_4x()
    CasanModernBertModel(tiny_config("modernbert")).save_pretrained(tmp_path / "model")
    message = run_without_casan_hf(TOO_OLD, tmp_path, python=python)
    assert f"CasanModernBert models need transformers >= {MINIMUM_TRANSFORMERS_MODERNBERT} (found 4.56" in message
