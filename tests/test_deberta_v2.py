"""The DeBERTa-v2/v3 family: transformers' DeBERTa is the reference at context_type="none" for every head and
every attention variant (both `share_att_key` settings, c2p and p2c alone or together, buckets, the convolution,
the legacy and the new masked-LM head); the decisions of docs/FAMILIES.md ("DeBERTa-v2 and v3") each have a test
here; padding, checkpointing, autocast, saving and a fresh process without casan_hf (on the pinned, the newest
and transformers 4.x) as for the other families. The generic suites (tests/tiny_models.py's FAMILY_TWINS, on the
family row's `tiny_config`) run the family too."""

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest
import torch
import transformers
from fresh_process import run_without_casan_hf
from test_transformers4 import PYTHON_4X
from tiny_models import (
    TINY,
    assert_outputs_close,
    assert_same_gradients,
    assert_same_weights,
    comparable_outputs,
    gradients_without_and_with_checkpointing,
    head_inputs,
    padded_batch,
)

from casan_hf import HEADS, CasanConfig, casan_class, casan_twin, get_family, get_head
from casan_hf.configuration_casan_deberta_v2 import CasanDebertaV2Config
from casan_hf.families import DEBERTA_V3_ATTENTION
from casan_hf.modeling_casan_deberta_v2 import CasanDisentangledSelfAttention
from casan_hf.options import OPTIONS


# The attention variants of DeBERTa checkpoints: v3 (shared keys, log buckets, LayerNorm on the relative
# embeddings, no absolute positions), v2 (separate position projections, the convolution after the first layer,
# `pos_att_type` as v2's config.json writes it), each position term alone, and no relative attention at all.
V3 = DEBERTA_V3_ATTENTION
V2 = dict(
    relative_attention=True,
    pos_att_type="p2c|c2p",
    share_att_key=False,
    conv_kernel_size=3,
    conv_act="gelu",
    type_vocab_size=2,
)
VARIANTS = {
    "v3": V3,
    "v2": V2,
    "c2p-separate": dict(V2, pos_att_type=["c2p"], conv_kernel_size=0),
    "p2c-shared": dict(V3, pos_att_type=["p2c"]),
    "absolute": dict(relative_attention=False, position_biased_input=True),
}
CASES = [(variant, head.name) for variant in ("v3", "v2") for head in HEADS] + [
    (variant, head) for variant in VARIANTS if variant not in ("v3", "v2") for head in ("base", "masked-lm")
]
LENGTHS = [9, 5, 7]


def config(variant="v3", **options):
    return CasanDebertaV2Config(**{**TINY, **VARIANTS[variant], "num_labels": 2, **options})


def source(variant, head, **options):
    """transformers' own DeBERTa-v2 model of the head, tiny and random, in eval mode."""
    source_class = getattr(transformers, get_family("deberta-v2").source_class_name(get_head(head)))
    torch.manual_seed(0)
    source_config = transformers.DebertaV2Config(**{**TINY, **VARIANTS[variant], "num_labels": 2, **options})
    return source_class(source_config).eval()


def inputs_for(head, seed=0):
    return head_inputs(casan_class("deberta-v2", head), *padded_batch(LENGTHS, seed=seed))


def test_the_options_are_casan_configs():
    """CasanDebertaV2Config writes the CASAN options' fields out; they are CasanConfig's, name, type and default."""
    names = {option.name for option in OPTIONS}
    fields = {
        config_class: {field.name: field for field in dataclasses.fields(config_class) if field.name in names}
        for config_class in (CasanConfig, CasanDebertaV2Config)
    }
    assert set(fields[CasanDebertaV2Config]) == names
    for name, field in fields[CasanConfig].items():
        mine = fields[CasanDebertaV2Config][name]
        assert (mine.type, mine.default) == (field.type, field.default), name
        if field.default_factory is not dataclasses.MISSING:
            assert mine.default_factory() == field.default_factory(), name
    with pytest.raises(ValueError, match="context_type"):
        config(context_type="sideways")
    assert config(pos_att_type="p2c|c2p").pos_att_type == ["p2c", "c2p"]


@pytest.mark.parametrize(("variant", "head"), CASES)
def test_none_is_deberta(tmp_path, variant, head):
    """A checkpoint saved by transformers' DeBERTa-v2 class of the head loads with nothing missing or left over
    and gives exactly its outputs and loss (`torch.equal`): both classes load the folder, so both read the same
    weights in place from the same file, the same arithmetic."""
    saved = source(variant, head)
    saved.save_pretrained(tmp_path)
    reference = type(saved).from_pretrained(tmp_path).eval()
    model_class = casan_class("deberta-v2", head)
    model, info = model_class.from_pretrained(tmp_path, context_type="none", output_loading_info=True)
    assert not any(info.values()), info
    inputs = inputs_for(head)
    with torch.no_grad():
        expected = reference(**inputs, output_hidden_states=True, output_attentions=True)
        actual = model.eval()(**inputs, output_hidden_states=True, output_attentions=True)
    for name, tensor in comparable_outputs(expected).items():
        assert torch.equal(comparable_outputs(actual)[name], tensor), name
    for ours, theirs in zip(
        actual.hidden_states + actual.attentions, expected.hidden_states + expected.attentions, strict=True
    ):
        assert torch.equal(ours, theirs)


def test_the_new_masked_lm_head_is_deberta(tmp_path):
    """`legacy=False` (`lm_predictions.lm_head`, reading the word embeddings): the same weights and logits; its
    FSDP2 plan keeps the word embeddings in the root's group, since the head reads them after the embeddings."""
    source("v3", "masked-lm", legacy=False).save_pretrained(tmp_path)
    # Both load the folder: the same weights read in place from the same file, the same arithmetic.
    reference = transformers.DebertaV2ForMaskedLM.from_pretrained(tmp_path).eval()
    model, info = casan_class("deberta-v2", "masked-lm").from_pretrained(
        tmp_path, context_type="none", output_loading_info=True
    )
    assert not any(info.values()), info
    assert any(name.startswith("lm_predictions.lm_head.") for name in model.state_dict())
    inputs = inputs_for("masked-lm")
    with torch.no_grad():
        assert torch.equal(model.eval()(**inputs).logits, reference(**inputs).logits)
    assert "lm_predictions" in model.fsdp_plan and "deberta.embeddings.word_embeddings" not in model.fsdp_plan
    assert model.get_output_embeddings() is None


def test_the_new_masked_lm_head_resizes_with_the_vocabulary():
    """`legacy=False`: `resize_token_embeddings` resizes the head's bias with the word embeddings (the head has no
    output embeddings of its own), keeping the old words' logits; `set_output_embeddings` says why it has none."""
    torch.manual_seed(0)
    model = casan_class("deberta-v2", "masked-lm")(config("v3", legacy=False)).eval()
    inputs = inputs_for("masked-lm")
    with torch.no_grad():
        before = model(**inputs).logits
        model.resize_token_embeddings(TINY["vocab_size"] + 10)
        after = model(**inputs)
    assert model.lm_predictions.lm_head.bias.shape == (TINY["vocab_size"] + 10,)
    assert after.logits.shape == (*before.shape[:-1], TINY["vocab_size"] + 10)
    # The same weights in a wider product: the matrix kernels may block it otherwise and round differently.
    assert_outputs_close({"logits": after.logits[..., : TINY["vocab_size"]]}, {"logits": before})
    with pytest.raises(ValueError, match="legacy=False"):
        model.set_output_embeddings(torch.nn.Linear(TINY["hidden_size"], TINY["vocab_size"]))


@pytest.mark.parametrize("variant", ["v3", "v2"])
def test_a_gate_fixed_at_zero_is_deberta(variant):
    """The mixer is the only change: with the gate fixed at 0 the content projections come back as they were and
    the model is DeBERTa, in both `share_att_key` settings (the positions' projections take no context)."""
    reference = source(variant, "base")
    model = casan_twin(reference, context_type="deep_global", gate="fixed", fixed_gate=0.0).eval()
    assert all(layer.attention.self.context_mixer is not None for layer in model.encoder.layer)
    inputs = inputs_for("base")
    with torch.no_grad():
        assert torch.equal(model(**inputs).last_hidden_state, reference(**inputs).last_hidden_state)


@pytest.mark.parametrize("variant", ["v3", "v2", "c2p-separate", "p2c-shared"])
def test_the_mixed_query_and_key_feed_both_position_terms(variant, monkeypatch):
    """Decision: content-to-position takes the mixed query, position-to-content the mixed key (what
    `disentangled_attention_bias` receives is the mixer's output, not the plain projections), and the position
    embeddings go in as DeBERTa gives them."""
    torch.manual_seed(0)
    model = casan_class("deberta-v2", "base")(config(variant, context_type="global", gate_bias_init=0.0)).eval()
    mixed, received = [], []
    original_bias = CasanDisentangledSelfAttention.disentangled_attention_bias

    def spy_bias(self, query_layer, key_layer, relative_pos, rel_embeddings, scale_factor):
        received.append((self, query_layer, key_layer, rel_embeddings))
        return original_bias(self, query_layer, key_layer, relative_pos, rel_embeddings, scale_factor)

    monkeypatch.setattr(CasanDisentangledSelfAttention, "disentangled_attention_bias", spy_bias)
    for layer in model.encoder.layer:
        attention = layer.attention.self
        attention.context_mixer.register_forward_hook(lambda module, args, output: mixed.append(output[:2]))
    with torch.no_grad():
        model(*padded_batch(LENGTHS))
    assert len(mixed) == len(received) == TINY["num_hidden_layers"]
    rel_embeddings = model.encoder.get_rel_embedding()
    for (query, key), (attention, query_layer, key_layer, positions) in zip(mixed, received, strict=True):
        heads = attention.num_attention_heads
        assert torch.equal(query_layer, attention.transpose_for_scores(query, heads))
        assert torch.equal(key_layer, attention.transpose_for_scores(key, heads))
        assert torch.equal(positions, rel_embeddings)  # eval: no dropout on the position embeddings


def test_the_context_changes_the_scores_through_every_term():
    """With the context, c2c, c2p and p2c all move: the model differs from DeBERTa with each position term alone."""
    for variant in ("c2p-separate", "p2c-shared"):
        reference = source(variant, "base")
        model = casan_twin(reference, context_type="global", gate_bias_init=0.0).eval()
        inputs = inputs_for("base")
        with torch.no_grad():
            assert not torch.allclose(model(**inputs).last_hidden_state, reference(**inputs).last_hidden_state)


@pytest.mark.parametrize("context_type", ["global", "deep", "deep_global"])
@pytest.mark.parametrize("variant", ["v2", "p2c-shared"])
def test_padding_does_not_change_real_tokens(variant, context_type):
    """v2's convolution and separate position projections, a lone position term: as tests/test_context.py checks
    the tiny v3-with-convolution config of the family row's `tiny_config`."""
    torch.manual_seed(0)
    model = casan_class("deberta-v2", "base")(config(variant, context_type=context_type, gate_bias_init=0.0)).eval()
    input_ids, attention_mask = padded_batch(LENGTHS)
    with torch.no_grad():
        batched = model(input_ids.masked_fill(attention_mask == 0, 42), attention_mask=attention_mask)
        for row, length in enumerate(LENGTHS):
            alone = model(input_ids[row : row + 1, :length], attention_mask=attention_mask[row : row + 1, :length])
            diff = (batched.last_hidden_state[row, :length] - alone.last_hidden_state[0]).abs().max()
            assert diff <= 1e-5, f"row {row}: {diff}"


def test_the_layer_context_source_is_the_layer_input():
    """Decision: a layer's context is built from its input, as in BERT (post-norm): layer 0's the embeddings, layer
    1's the first layer's output after the convolution, which DeBERTa's `hidden_states[1]` is."""
    torch.manual_seed(0)
    model = casan_class("deberta-v2", "base")(config("v2", context_type="deep")).eval()
    seen = []
    model.encoder.layer[2].attention.self.register_forward_hook(
        lambda module, args, kwargs, output: seen.append(args[4] if len(args) > 4 else kwargs["context"]),
        with_kwargs=True,
    )
    input_ids, attention_mask = padded_batch(LENGTHS)
    with torch.no_grad():
        hidden_states = model(input_ids, attention_mask=attention_mask, output_hidden_states=True).hidden_states
    (context,) = seen
    assert len(context) == 2
    assert torch.equal(context[0], hidden_states[0]) and torch.equal(context[1], hidden_states[1])


def test_gradient_checkpointing_gives_the_same_gradients():
    """Checkpointed layers (the relative embeddings and the context passed positionally) give the same loss and
    gradients, the relative embeddings' and the convolution's included."""
    torch.manual_seed(0)
    model_class = casan_class("deberta-v2", "sequence-classification")
    model = model_class(config("v2", context_type="deep_global", gate_bias_init=0.0)).train()
    plain, checkpointed = gradients_without_and_with_checkpointing(model, inputs_for("sequence-classification"))
    assert_same_gradients(plain, checkpointed)
    assert any("rel_embeddings" in name for name in checkpointed) and any(".conv." in name for name in checkpointed)


def test_the_encoder_builds_no_layer_it_does_not_keep(monkeypatch):
    """The encoder builds DeBERTa's modules but not DeBERTa's own layers, which the context-aware ones replace."""
    built = []
    build = transformers.models.deberta_v2.modeling_deberta_v2.DebertaV2Layer.__init__
    monkeypatch.setattr(
        transformers.models.deberta_v2.modeling_deberta_v2.DebertaV2Layer,
        "__init__",
        lambda layer, *args, **kwargs: built.append(layer) or build(layer, *args, **kwargs),
    )
    encoder = casan_class("deberta-v2", "base")(config("v2")).encoder
    assert not built and len(encoder.layer) == TINY["num_hidden_layers"]
    assert encoder.rel_embeddings is not None and encoder.conv is not None


def test_bf16_autocast_trains():
    torch.manual_seed(0)
    model = casan_class("deberta-v2", "masked-lm")(config("v3", context_type="deep", gate_bias_init=0.0)).train()
    inputs = inputs_for("masked-lm")
    full = model(**inputs).loss
    with torch.autocast("cpu", dtype=torch.bfloat16):
        outputs = model(**inputs, output_context_gates=True)
    outputs.loss.backward()
    assert outputs.logits.dtype == torch.bfloat16 and torch.isfinite(outputs.loss)
    assert abs(outputs.loss.item() - full.item()) < 0.05
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_sdpa_is_refused():
    """transformers' DeBERTa-v2 attends eagerly only; so does its CASAN twin, with transformers' error."""
    model_class = casan_class("deberta-v2", "base")
    with pytest.raises(ValueError, match="scaled_dot_product_attention"):
        model_class._from_config(config(), attn_implementation="sdpa")
    assert model_class(config()).config._attn_implementation == "eager"


def test_saved_folders_reload_and_keep_their_options(tmp_path):
    torch.manual_seed(0)
    model_class = casan_class("deberta-v2", "sequence-classification")
    model = model_class(config("v2", context_type="deep", gate_per_head=True, classifier_pooling="mean")).eval()
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "casan_deberta-v2" and saved["auto_map"]["AutoConfig"].startswith(
        "configuration_casan_deberta_v2."
    )
    assert (tmp_path / "modeling_casan_deberta_v2.py").is_file()
    reloaded = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert type(reloaded) is model_class
    assert_same_weights(reloaded, model)
    inputs = inputs_for("sequence-classification")
    with torch.no_grad():
        assert_outputs_close(reloaded(**inputs), model(**inputs))
    with pytest.raises(ValueError, match="context_type='deep'"):
        model_class.from_pretrained(tmp_path, context_type="global")


LOAD = """
import json, sys, torch, transformers
cases = json.load(open("cases.json"))
for case in cases:
    model = getattr(transformers, case["auto_class"]).from_pretrained(case["folder"], trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
    inputs = torch.load(case["inputs"])
    with torch.no_grad():
        outputs = model(**inputs, output_context_gates=True)
    torch.save({**outputs, "context_gates": torch.stack(outputs.context_gates)}, f"{case['folder']}/{sys.argv[1]}")
print(transformers.__version__, len(cases))
"""
# This process's transformers (the pinned one in `make test`, the newest in `make test-latest`, which runs this
# file) and 4.x, the oldest supported (`compat.MINIMUM_TRANSFORMERS`; `make test` creates its environment).
ENVIRONMENTS = {"this-transformers": Path(sys.executable), "transformers-4": PYTHON_4X}


@pytest.fixture(scope="module")
def saved_heads(tmp_path_factory):
    """Every head saved, v3 and v2 in turn, with deep_global context (gates near 0.5) and the family's defaults."""
    root = tmp_path_factory.mktemp("deberta_folders")
    cases = []
    for index, head in enumerate(HEADS):
        torch.manual_seed(index)
        variant = ("v3", "v2")[index % 2]
        model_class = casan_class("deberta-v2", head.name)
        model = model_class(config(variant, context_type="deep_global", gate_bias_init=0.0)).eval()
        folder = root / model_class.__name__
        model.save_pretrained(folder)
        inputs = inputs_for(head.name, seed=index)
        with torch.no_grad():
            outputs = model(**inputs, output_context_gates=True)
        expected = {**comparable_outputs(outputs), "context_gates": torch.stack(outputs.context_gates)}
        torch.save(inputs, folder / "inputs.pt")
        torch.save(expected, folder / "expected.pt")
        cases.append(
            {
                "folder": str(folder),
                "auto_class": head.auto_class,
                "inputs": str(folder / "inputs.pt"),
                "expected": str(folder / "expected.pt"),
            }
        )
    (root / "cases.json").write_text(json.dumps(cases))
    return root


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_every_head_loads_in_a_fresh_process_without_casan_hf(saved_heads, environment):
    """v3's and v2's folders (shared and separate position projections, the convolution) load where casan_hf cannot
    be imported: the oldest supported release for DeBERTa-v2 folders is the package's, 4.56."""
    python = ENVIRONMENTS[environment]
    if not python.is_file():
        message = f"no transformers 4 environment at {python.parent.parent}: `make test` creates it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    loaded = f"loaded-{environment}.pt"
    version, count = run_without_casan_hf(LOAD, saved_heads, python=python, args=[loaded]).split()
    assert count == str(len(HEADS))
    for case in json.loads((saved_heads / "cases.json").read_text()):
        assert_outputs_close(torch.load(Path(case["folder"]) / loaded), torch.load(case["expected"]), case["folder"])
    assert version == (transformers.__version__ if environment == "this-transformers" else version)
    assert version.startswith("4.") == (environment == "transformers-4")


def test_run_mlm_trains_a_converted_deberta(tmp_path, minilm_path, glue_dir, text_file, monkeypatch):
    """A DeBERTa-v2 base checkpoint (no masked-LM head: the legacy head starts random) trains a few steps; the folder
    reloads as the family's masked LM. run_glue and the converter: tests/test_families.py."""
    from conftest import load_script
    from glue_helpers import make_tiny_source, read_json
    from test_run_mlm import TINY_MLM

    source_folder = make_tiny_source(tmp_path / "source", "deberta-v2", minilm_path, glue_dir)
    output_dir = tmp_path / "out"
    args = ["--model_name_or_path", source_folder, "--train_file", text_file, "--do_train", "--do_eval",
            "--max_steps", "2", "--output_dir", output_dir, "--context_type", "global", *TINY_MLM]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["run_mlm.py", *map(str, args)])
    load_script("run_mlm").main()
    assert read_json(output_dir / "config.json")["architectures"] == ["CasanDebertaV2ForMaskedLM"]
    assert read_json(output_dir / "eval_results.json")["perplexity"] > 1
    model = transformers.AutoModelForMaskedLM.from_pretrained(output_dir)
    assert type(model) is casan_class("deberta-v2", "masked-lm")
