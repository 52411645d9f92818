"""Saving, loading and training features: round trips that keep every weight exactly and the outputs, checkpoints
that do not fit, gradient checkpointing, bf16 and torch.compile."""

import json
import sys
from pathlib import Path

import pytest
import torch
from tiny_models import (
    CONTEXT_TYPES,
    TINY,
    assert_outputs_close,
    assert_same_gradients,
    assert_same_weights,
    gradients_without_and_with_checkpointing,
    padded_batch,
    tiny_config,
)
from transformers import AutoModel, AutoModelForSequenceClassification, BertConfig, BertModel

import casan_hf
from casan_hf import CAUSAL_FAMILIES, FAMILIES, CasanForSequenceClassification, CasanModel


VARIANTS = [
    dict(context_type="global"),
    dict(context_type="deep"),
    dict(context_type="deep_global"),
    dict(context_type="deep_global", gate_per_head=True),
    dict(context_type="deep", gate_per_head=True, context_targets=["key"]),
    dict(context_type="deep_global", context_rank=4, context_targets=["query"]),
    dict(context_type="deep", context_rank=4, context_layers=[2]),
    dict(context_type="global", gate="fixed", fixed_gate=0.4),
    dict(context_type="none"),
]


@pytest.mark.parametrize("options", VARIANTS, ids=lambda o: "-".join(str(v) for v in o.values()))
def test_save_load_round_trip_keeps_the_weights_and_the_outputs(tmp_path, options):
    torch.manual_seed(0)
    model = CasanForSequenceClassification(tiny_config(**options, num_labels=3, gate_bias_init=0.0)).eval()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert type(loaded) is CasanForSequenceClassification
    assert_same_weights(loaded, model)
    input_ids, attention_mask = padded_batch([6, 3])
    with torch.no_grad():
        expected = model(input_ids, attention_mask=attention_mask, output_context_gates=True)
        actual = loaded(input_ids, attention_mask=attention_mask, output_context_gates=True)
    assert len(actual.context_gates) == len(expected.context_gates)
    assert_outputs_close(
        {"logits": actual.logits, **dict(enumerate(actual.context_gates))},
        {"logits": expected.logits, **dict(enumerate(expected.context_gates))},
    )


def test_saved_folder_holds_the_code_and_auto_map(tmp_path):
    CasanModel(tiny_config()).save_pretrained(tmp_path)
    bert_files = {
        "configuration_casan.py",
        "modeling_casan.py",
        "options.py",
        "families.py",
        "context.py",
        "context_mixer.py",
        "local_bias.py",
        "fused_mixer.py",
        "pooling.py",
        "compat.py",
    }
    assert {path.name for path in tmp_path.glob("*.py")} == bert_files
    # The package's top folder holds exactly the model files: what a saved BERT, ModernBERT, DeBERTa-v2, causal LM or
    # translation folder carries, and modeling_casan_auto.py, which gathers every modeling file's classes for the
    # library (no folder needs it).
    top_folder = {path.name for path in Path(casan_hf.__file__).parent.glob("*.py")} - {"__init__.py"}
    family_files = {
        f"{module}.py"
        for family in (*FAMILIES, *CAUSAL_FAMILIES)
        for module in (family.modeling_module, family.configuration_module)
    }
    assert top_folder == bert_files | family_files | {
        "configuration_casan_marian.py",
        "modeling_casan_marian.py",
        "modeling_casan_auto.py",
    }
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert len(auto_map) == 7 and auto_map["AutoModelForMaskedLM"] == "modeling_casan.CasanForMaskedLM"


def test_saved_code_imports_only_torch_transformers_and_itself(tmp_path):
    CasanModel(tiny_config()).save_pretrained(tmp_path)
    for code in tmp_path.glob("*.py"):
        for line in code.read_text().splitlines():
            if line.startswith(("import ", "from ")):
                module = line.split()[1]
                # The standard library is everywhere; the only installed packages are torch and transformers.
                allowed = {"torch", "transformers", *sys.stdlib_module_names}
                assert module.split(".")[0] in allowed or module.startswith("."), f"{code.name}: {line}"


@pytest.fixture
def trained_casan(tmp_path):
    folder = tmp_path / "casan"
    CasanModel(tiny_config(context_type="deep_global")).save_pretrained(folder)
    return folder


@pytest.mark.parametrize(
    "requested",
    [
        dict(context_type="global"),
        dict(context_type="none"),
        dict(context_targets=["key"]),
        dict(context_rank=8),
        dict(context_layers=[0]),
        dict(gate="fixed"),
        dict(gate_per_head=True),
    ],
)
def test_checkpoint_that_does_not_fit_is_refused(trained_casan, requested):
    name, value = next(iter(requested.items()))
    with pytest.raises(ValueError, match=f"trained with {name}=.*cannot be loaded with {name}="):
        CasanModel.from_pretrained(trained_casan, **requested)
    with pytest.raises(ValueError, match=name):
        AutoModel.from_pretrained(trained_casan, **requested)


def test_matching_options_and_free_options_load(trained_casan):
    model = CasanModel.from_pretrained(trained_casan, context_type="deep_global", gate_bias_init=1.0)
    assert model.config.gate_bias_init == 1.0


def test_other_model_types_are_refused(tmp_path):
    config = BertConfig(**TINY).to_dict()
    config["model_type"] = "roberta"
    tmp_path.joinpath("config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="'roberta'; CASAN bert models load 'bert' or 'casan_bert'.*'electra'"):
        CasanModel.from_pretrained(tmp_path, context_type="global")


@pytest.mark.parametrize("use_reentrant", [False, True], ids=["non-reentrant", "reentrant"])
@pytest.mark.parametrize(
    "options",
    [*({"context_type": c} for c in CONTEXT_TYPES), {"context_type": "deep", "context_rank": 4}],
    ids=[*CONTEXT_TYPES, "deep-r4"],
)
def test_gradient_checkpointing_gives_the_same_gradients(options, use_reentrant):
    """Both of torch's checkpointing modes; the reentrant one sees only tensors passed as positional arguments,
    so the deep context (one tensor per earlier layer) must reach each layer that way."""
    torch.manual_seed(0)
    model = CasanForSequenceClassification(tiny_config(**options, num_labels=2, gate_bias_init=0.0))
    model.train()
    input_ids, attention_mask = padded_batch([6, 4, 2])
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 1, 1]))
    plain, checkpointed = gradients_without_and_with_checkpointing(model, inputs, {"use_reentrant": use_reentrant})
    assert_same_gradients(plain, checkpointed)
    assert any("context_mixer" in name for name in plain)


@pytest.mark.parametrize("context_type", CONTEXT_TYPES)
def test_bf16_matches_fp32(context_type):
    torch.manual_seed(0)
    model = CasanModel(tiny_config(context_type=context_type, gate_bias_init=0.0)).eval()
    input_ids, attention_mask = padded_batch([6, 3])
    with torch.no_grad():
        expected = model(input_ids, attention_mask=attention_mask).last_hidden_state
        actual = model.to(torch.bfloat16)(input_ids, attention_mask=attention_mask).last_hidden_state
    assert actual.dtype == torch.bfloat16
    real = attention_mask.bool()
    assert (actual.float() - expected)[real].abs().max() < 0.1


def test_torch_compile_matches_eager():
    torch.manual_seed(0)
    model = CasanModel(tiny_config(context_type="deep_global", gate_bias_init=0.0)).eval()
    input_ids, attention_mask = padded_batch([6, 3])
    compiled = torch.compile(model)
    with torch.no_grad():
        expected = model(input_ids, attention_mask=attention_mask, output_context_gates=True)
        actual = compiled(input_ids, attention_mask=attention_mask, output_context_gates=True)
    torch.testing.assert_close(actual.last_hidden_state, expected.last_hidden_state, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(actual.context_gates[2], expected.context_gates[2], atol=1e-6, rtol=1e-5)


def test_bert_checkpoint_loads_through_auto_classes_by_config(tmp_path):
    """A BERT checkpoint converted with from_pretrained keeps BERT's weights exactly."""
    torch.manual_seed(0)
    bert = BertModel(BertConfig(**TINY))
    bert.save_pretrained(tmp_path)
    casan = CasanModel.from_pretrained(tmp_path, context_type="deep")
    bert_weights = bert.state_dict()
    for name, tensor in casan.state_dict().items():
        if "context_mixer" not in name:
            assert torch.equal(tensor, bert_weights[name]), name
