"""LoRA adapters (PEFT) on CASAN models: an adapter trained on a saved CASAN model (BERT's, ModernBERT's, DeBERTa's)
reloads as CASAN with the same weights and outputs (BERT's and ModernBERT's also with only transformers and peft
installed), merges into a plain CASAN model, and an adapter of a conversion that was never saved does not name the
BERT checkpoint as its base."""

import json

import pytest
import torch
import transformers
from fresh_process import run_without_casan_hf
from peft import AutoPeftModelForSequenceClassification, LoraConfig, get_peft_model
from tiny_models import assert_outputs_close, assert_same_weights, padded_batch, tiny_config, tiny_source_config

from casan_hf import casan_class, get_family


# LoRA on the attention projections; the context and the classifier are new, so they train in full.
LORA = dict(
    task_type="SEQ_CLS", target_modules=["query", "key", "value"], modules_to_save=["context_mixer", "classifier"]
)
# ModernBERT's attention projects Q, K and V with one fused `Wqkv`.
LORA_TARGETS = {"bert": LORA["target_modules"], "modernbert": ["Wqkv"]}


def lora(family):
    return {**LORA, "target_modules": LORA_TARGETS[family]}


def converted_casan(folder, family="bert"):
    torch.manual_seed(0)
    source_class = getattr(transformers, f"{get_family(family).transformers_prefix}Model")
    source_class(tiny_source_config(family)).save_pretrained(folder / family)
    return casan_class(family, "sequence-classification").from_pretrained(
        folder / family, context_type="global", num_labels=2, gate_bias_init=0.0
    )


def trained(peft_model):
    """Stands in for training: every trainable weight moves (LoRA's B starts at zero)."""
    torch.manual_seed(1)
    with torch.no_grad():
        for parameter in peft_model.parameters():
            if parameter.requires_grad:
                parameter.add_(0.1 * torch.randn_like(parameter))
    return peft_model.eval()


def adapter_inputs():
    """Two sentences, one padded."""
    input_ids, attention_mask = padded_batch([6, 3])
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def check_adapter_reloads_and_merges(peft_model, model_class, folder, inputs):
    """Saves the trained adapter of the CASAN model saved in `folder / "casan"` to `folder / "adapter"`, and checks
    that it reloads as `model_class` with the same logits on `inputs`, merges into a plain `model_class` with them,
    and holds what training changed (the base alone gives other logits). Returns the adapter's logits."""
    with torch.no_grad():
        expected = peft_model(**inputs).logits
    peft_model.save_pretrained(folder / "adapter")

    loaded = AutoPeftModelForSequenceClassification.from_pretrained(folder / "adapter").eval()
    assert type(loaded.get_base_model()) is model_class
    assert_same_weights(loaded, peft_model)
    with torch.no_grad():
        assert_outputs_close({"logits": loaded(**inputs).logits}, {"logits": expected})
        merged = loaded.merge_and_unload()
        assert type(merged) is model_class
        torch.testing.assert_close(merged(**inputs).logits, expected, atol=1e-6, rtol=1e-5)
        # The adapter holds what training changed: the base alone gives other outputs.
        untrained = model_class.from_pretrained(folder / "casan").eval()
        assert not torch.allclose(untrained(**inputs).logits, expected)
    return expected


RELOAD = """
import json, torch
from peft import AutoPeftModelForSequenceClassification
model = AutoPeftModelForSequenceClassification.from_pretrained("adapter", trust_remote_code=True).eval()
inputs = torch.load("inputs.pt")
with torch.no_grad():
    logits = model(**inputs).logits
torch.save(logits, "logits.pt")
print(type(model.get_base_model()).__module__.split(".")[0])
"""


@pytest.mark.parametrize("family", LORA_TARGETS)
def test_adapter_reloads_as_casan_and_merges(tmp_path, family):
    model_class = casan_class(family, "sequence-classification")
    converted_casan(tmp_path, family).save_pretrained(tmp_path / "casan")
    base = model_class.from_pretrained(tmp_path / "casan")
    peft_model = trained(get_peft_model(base, LoraConfig(**lora(family))))
    assert any("context_mixer" in name for name, p in peft_model.named_parameters() if p.requires_grad)
    inputs = adapter_inputs()
    expected = check_adapter_reloads_and_merges(peft_model, model_class, tmp_path, inputs)
    assert json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())["base_model_name_or_path"] == str(
        tmp_path / "casan"
    )

    torch.save(inputs, tmp_path / "inputs.pt")
    assert run_without_casan_hf(RELOAD, tmp_path).split() == ["transformers_modules"]
    assert_outputs_close({"logits": torch.load(tmp_path / "logits.pt")}, {"logits": expected})


def test_adapter_of_an_unsaved_conversion_is_refused_when_saved(tmp_path):
    """It used to be saved naming no base, and its reload failed with "We couldn't connect to
    'https://huggingface.co'"; the message now says what to do, before any adapter file is written."""
    converted = converted_casan(tmp_path)
    assert converted.name_or_path == ""
    with pytest.raises(ValueError, match=r"never saved.*save the CASAN model first \(model.save_pretrained"):
        get_peft_model(converted, LoraConfig(**LORA)).save_pretrained(tmp_path / "adapter")
    assert list((tmp_path / "adapter").iterdir()) == []
    # Without adapters a conversion's tags are transformers' own.
    plain = converted_casan(tmp_path)
    plain.add_model_tags(["casan"])
    assert plain.model_tags == ["casan"]


def test_a_deberta_v2_adapter_reloads_as_casan_and_merges(tmp_path):
    """DeBERTa's attention projections are `query_proj`, `key_proj`, `value_proj` (not `pos_query_proj`), and its
    `pooler` is new beside the classifier: an adapter of a saved CASAN DeBERTa-v2 model reloads and merges."""
    model_class = casan_class("deberta-v2", "sequence-classification")
    torch.manual_seed(0)
    model_class(tiny_config("deberta-v2", context_type="global", num_labels=2)).save_pretrained(tmp_path / "casan")
    lora = dict(
        task_type="SEQ_CLS",
        target_modules=["query_proj", "key_proj", "value_proj"],
        modules_to_save=["context_mixer", "pooler", "classifier"],
    )
    peft_model = trained(get_peft_model(model_class.from_pretrained(tmp_path / "casan"), LoraConfig(**lora)))
    trainable = [name for name, parameter in peft_model.named_parameters() if parameter.requires_grad]
    assert any(".query_proj.lora_A" in name for name in trainable) and not any("pos_" in name for name in trainable)
    check_adapter_reloads_and_merges(peft_model, model_class, tmp_path, adapter_inputs())
