"""The context-aware encoder-decoder: Marian exactly at context_type="none", a Marian checkpoint converts,
padding never reaches a real token, the options are CasanConfig's, and a saved folder loads without casan_hf."""

import copy
import json
import sys

import pytest
import torch
from fresh_process import run_without_casan_hf
from tiny_models import CONTEXT_TYPES, assert_outputs_close, assert_same_weights
from transformers import AutoModelForSeq2SeqLM, BertConfig, BertModel, MarianConfig, MarianMTModel

from casan_hf import CasanMarianConfig, CasanMarianMTModel
from casan_hf.configuration_casan import option_defaults
from casan_hf.context import CONTEXT_MIXER_MODULE
from casan_hf.options import option_names


PAD = 59
TINY_MARIAN = dict(
    vocab_size=60,
    d_model=32,
    encoder_layers=3,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=37,
    decoder_ffn_dim=37,
    max_position_embeddings=64,
    pad_token_id=PAD,
    decoder_start_token_id=PAD,
    eos_token_id=0,
    forced_eos_token_id=0,
)
MARIAN_CODE_FILES = {
    "configuration_casan_marian.py",
    "modeling_casan_marian.py",
    "context.py",
    "context_mixer.py",
    "local_bias.py",
    "fused_mixer.py",
    "configuration_casan.py",
    "options.py",
    "families.py",
    "compat.py",
}


def source_batch(lengths, seed=0):
    """Right-padded random sentences ending in </s> (id 0): (input_ids, attention_mask)."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.full((len(lengths), max(lengths)), PAD)
    attention_mask = torch.zeros_like(input_ids)
    for row, length in enumerate(lengths):
        input_ids[row, : length - 1] = torch.randint(1, PAD, (length - 1,), generator=generator)
        input_ids[row, length - 1] = 0
        attention_mask[row, :length] = 1
    return input_ids, attention_mask


@pytest.fixture(scope="module")
def marian_folder(tmp_path_factory):
    """A tiny random Marian checkpoint saved to disk (no real one can be downloaded here)."""
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("marian")
    MarianMTModel(MarianConfig(**TINY_MARIAN)).save_pretrained(folder)
    return folder


def tiny_casan(**options):
    torch.manual_seed(0)
    return CasanMarianMTModel(CasanMarianConfig(**TINY_MARIAN, gate_bias_init=0.0, **options)).eval()


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_none_is_marian_logits_and_beam_search(marian_folder, attn_implementation):
    marian = MarianMTModel.from_pretrained(marian_folder, attn_implementation=attn_implementation).eval()
    casan = CasanMarianMTModel.from_pretrained(
        marian_folder, context_type="none", attn_implementation=attn_implementation
    ).eval()
    assert casan.name_or_path == ""  # converted: no checkpoint of its own until saved
    input_ids, attention_mask = source_batch([7, 4])
    labels = torch.randint(1, PAD, (2, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = marian(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        actual = casan(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    assert torch.equal(expected.logits, actual.logits) and torch.equal(expected.loss, actual.loss)
    generate = dict(attention_mask=attention_mask, num_beams=3, max_new_tokens=8, do_sample=False)
    assert torch.equal(marian.generate(input_ids, **generate), casan.generate(input_ids, **generate))


@pytest.mark.parametrize("context_type", CONTEXT_TYPES)
def test_marian_checkpoint_converts_with_only_the_context_new(marian_folder, context_type):
    casan = CasanMarianMTModel.from_pretrained(marian_folder, context_type=context_type)
    marian_state = MarianMTModel.from_pretrained(marian_folder).state_dict()
    casan_state = casan.state_dict()
    assert {key for key in casan_state if key not in marian_state} == {
        key for key in casan_state if f".self_attn{CONTEXT_MIXER_MODULE}" in key and key.startswith("model.encoder.")
    }
    assert all(torch.equal(casan_state[key], value) for key, value in marian_state.items())


@pytest.mark.parametrize("gate_per_head", [False, True], ids=["shared-gate", "gate-per-head"])
@pytest.mark.parametrize("context_type", CONTEXT_TYPES)
def test_encoder_padding_never_changes_a_real_token(context_type, gate_per_head):
    encoder = tiny_casan(context_type=context_type, gate_per_head=gate_per_head).get_encoder()
    input_ids, attention_mask = source_batch([7, 4])
    with torch.no_grad():
        padded = encoder(input_ids=input_ids, attention_mask=attention_mask, output_context_gates=True)
        alone = encoder(input_ids=input_ids[1:, :4], attention_mask=attention_mask[1:, :4], output_context_gates=True)
    torch.testing.assert_close(padded.last_hidden_state[1, :4], alone.last_hidden_state[0], atol=1e-5, rtol=1e-5)
    for gates, gates_alone in zip(padded.context_gates, alone.context_gates, strict=True):
        torch.testing.assert_close(gates[1, ..., :4], gates_alone[0], atol=1e-5, rtol=1e-5)
    assert len(padded.context_gates) == 3 and padded.context_gates[-1].abs().sum() > 0


def test_the_context_fields_are_casan_configs():
    """CasanMarianConfig writes the context options' fields out; they are CasanConfig's, name, type and default."""
    import dataclasses

    from casan_hf import CasanConfig

    def declared(config_class):
        return {
            field.name: (field.type, field.default, field.default_factory)
            for field in dataclasses.fields(config_class)
            if field.name in option_names("context")
        }

    marian, bert = declared(CasanMarianConfig), declared(CasanConfig)
    assert list(marian) == list(option_names("context"))
    for name, (annotation, default, factory) in bert.items():
        assert marian[name][:2] == (annotation, default), name
        assert (marian[name][2] is dataclasses.MISSING) == (factory is dataclasses.MISSING), name
        if factory is not dataclasses.MISSING:
            assert marian[name][2]() == factory(), name


def test_options_are_casan_configs_with_its_defaults_and_checks():
    config = CasanMarianConfig(**TINY_MARIAN)
    assert {name: getattr(config, name) for name in option_names("context")} == {
        name: value for name, value in option_defaults().items() if name in option_names("context")
    }
    with pytest.raises(ValueError, match="`context_type` must be one of 'global', 'deep', 'deep_global', 'none'"):
        CasanMarianConfig(context_type="local")
    with pytest.raises(ValueError, match="`classifier_pooling` is a pooling option"):
        CasanMarianConfig(classifier_pooling="mean")
    with pytest.raises(ValueError, match=r"`context_layers` \[3\] out of range: the model has 3 layers"):
        CasanMarianConfig(**TINY_MARIAN, context_layers=[3])
    with pytest.raises(ValueError, match="share_encoder_decoder_embeddings=True"):
        CasanMarianConfig(share_encoder_decoder_embeddings=False)
    config.gate = "fixed"
    with pytest.raises(ValueError, match="`gate` must be one of 'dynamic', 'fixed'; got 'soft'"):
        config.gate = "soft"


def test_only_marian_checkpoints_convert_and_structure_is_kept(tmp_path):
    BertModel(
        BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=37)
    ).save_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match="model_type 'bert'; CasanMarian models load 'marian' or 'casan_marian'"):
        CasanMarianMTModel.from_pretrained(tmp_path / "bert")
    tiny_casan(context_type="deep").save_pretrained(tmp_path / "casan")
    with pytest.raises(ValueError, match="trained with context_type='deep'; it cannot be loaded with"):
        CasanMarianMTModel.from_pretrained(tmp_path / "casan", context_type="global")


def test_save_load_round_trip_and_the_folder_code(tmp_path):
    model = tiny_casan(context_type="deep_global")
    model.save_pretrained(tmp_path)
    assert {path.name for path in tmp_path.glob("*.py")} == MARIAN_CODE_FILES
    for code in tmp_path.glob("*.py"):
        for line in code.read_text().splitlines():
            if line.startswith(("import ", "from ")):
                module = line.split()[1]
                allowed = {"torch", "transformers", *sys.stdlib_module_names}  # the standard library is everywhere
                assert module.split(".")[0] in allowed or module.startswith("."), f"{code.name}: {line}"
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "casan_marian"
    assert config["auto_map"]["AutoModelForSeq2SeqLM"] == "modeling_casan_marian.CasanMarianMTModel"
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is CasanMarianMTModel
    assert_same_weights(loaded, model)
    input_ids, attention_mask = source_batch([6, 3])
    decoder_input_ids = torch.randint(1, PAD, (2, 4), generator=torch.Generator().manual_seed(2))
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids)
    with torch.no_grad():
        assert_outputs_close({"logits": loaded(**inputs).logits}, {"logits": model(**inputs).logits})
    # The tokens, exactly: a copy of the loaded weights into memory of their own, the saved model's arithmetic (a
    # rounding step could flip a near tie between two tokens).
    generate = dict(attention_mask=attention_mask, num_beams=2, max_new_tokens=6)
    assert torch.equal(model.generate(input_ids, **generate), copy.deepcopy(loaded).generate(input_ids, **generate))


LOAD_AND_TRANSLATE = """
import torch
from transformers import AutoModelForSeq2SeqLM
model = AutoModelForSeq2SeqLM.from_pretrained("saved", trust_remote_code=True).eval()
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
inputs, decoder_input_ids = torch.load("inputs.pt"), torch.load("decoder_input_ids.pt")
with torch.no_grad():
    logits = model(**inputs, decoder_input_ids=decoder_input_ids).logits
torch.save({"logits": logits, "generated": model.generate(**inputs, num_beams=2, max_new_tokens=6)}, "outputs.pt")
print(type(model).__name__)
"""


def test_saved_folder_translates_in_a_fresh_process_without_casan_hf(tmp_path):
    model = tiny_casan(context_type="deep")
    model.save_pretrained(tmp_path / "saved")
    input_ids, attention_mask = source_batch([6, 3])
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    decoder_input_ids = torch.randint(1, PAD, (2, 4), generator=torch.Generator().manual_seed(2))
    torch.save(inputs, tmp_path / "inputs.pt")
    torch.save(decoder_input_ids, tmp_path / "decoder_input_ids.pt")
    assert run_without_casan_hf(LOAD_AND_TRANSLATE, tmp_path).strip() == "CasanMarianMTModel"
    outputs = torch.load(tmp_path / "outputs.pt")
    with torch.no_grad():
        assert_outputs_close(outputs, {"logits": model(**inputs, decoder_input_ids=decoder_input_ids).logits})
    # The tokens, exactly, against the folder loaded here: the same weights read in place from the same file, the
    # same arithmetic (a rounding step could flip a near tie between two tokens).
    loaded = CasanMarianMTModel.from_pretrained(tmp_path / "saved").eval()
    assert torch.equal(outputs["generated"], loaded.generate(**inputs, num_beams=2, max_new_tokens=6))


def test_token_cross_entropy_is_the_unsmoothed_loss_per_target_token(tmp_path):
    """One evaluation batch of every pair: the mean loss of the model without label smoothing, per real token."""
    from datasets import Dataset
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

    from casan_hf.translation import token_cross_entropy

    model = tiny_casan(context_type="deep_global")
    input_ids, attention_mask = source_batch([7, 4, 5])
    sources = [row[mask.bool()].tolist() for row, mask in zip(input_ids, attention_mask, strict=True)]
    dataset = Dataset.from_dict({"input_ids": sources, "labels": [source[:5] for source in sources]})

    def collator(rows):
        width = max(len(row["input_ids"]) for row in rows)
        label_width = max(len(row["labels"]) for row in rows)
        labels = torch.tensor([row["labels"] + [-100] * (label_width - len(row["labels"])) for row in rows])
        return {
            "input_ids": torch.tensor([row["input_ids"] + [PAD] * (width - len(row["input_ids"])) for row in rows]),
            "attention_mask": torch.tensor(
                [[1] * len(row["input_ids"]) + [0] * (width - len(row["input_ids"])) for row in rows]
            ),
            "labels": labels,
            "decoder_input_ids": model.prepare_decoder_input_ids_from_labels(labels=labels),
        }

    args = Seq2SeqTrainingArguments(
        tmp_path, per_device_eval_batch_size=2, label_smoothing_factor=0.1, report_to="none"
    )
    trainer = Seq2SeqTrainer(model=model, args=args, data_collator=collator)
    batch = collator([dataset[i] for i in range(3)])
    with torch.no_grad():
        expected = model(**batch).loss.item()
    assert token_cross_entropy(trainer, dataset) == pytest.approx(expected, rel=1e-5)
