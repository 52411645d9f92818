"""RoBERTa, XLM-RoBERTa, ELECTRA and DeBERTa-v2 checkpoints convert as BERT's do: every source weight loads, the
context alone is new, the converted model starts near its source, run_glue fine-tunes it, and a checkpoint of the
wrong family is refused with the families named, and an empty batch is refused first by every family and the
translation model's encoder, for every context kind. (Exact parity at context_type="none" for every family and head,
padding invariance and the fresh-process load are in test_bert_reference, test_context and test_remote_code.)"""

import sys

import pytest
import torch
import transformers
from conftest import load_script
from glue_helpers import TINY_RUN, make_tiny_source, read_json
from test_translation_model import TINY_MARIAN
from tiny_models import padded_batch, tiny_causal_source_config, tiny_config, tiny_source_config

from casan_hf import (
    CAUSAL_FAMILIES,
    FAMILIES,
    FAMILY_CONFIGS,
    CasanElectraConfig,
    CasanMarianConfig,
    CasanMarianMTModel,
    casan_class,
    get_family,
    get_head,
)
from casan_hf.context import CONTEXT_MIXER_MODULE


# Every family but BERT, the first row, whose reference is the real MiniLM checkpoint (tests/test_bert_reference.py).
OTHER_FAMILIES = tuple(family.name for family in FAMILIES[1:])


@pytest.fixture(scope="module")
def sources(tmp_path_factory, minilm_path, glue_dir):
    """A tiny random checkpoint of each family's own base model, with a tokenizer of its kind."""
    root = tmp_path_factory.mktemp("sources")
    return {family: make_tiny_source(root / family, family, minilm_path, glue_dir) for family in OTHER_FAMILIES}


@pytest.mark.parametrize("family", OTHER_FAMILIES)
def test_converted_checkpoint_loads_every_weight_and_starts_near_its_source(sources, family):
    source = getattr(transformers, f"{get_family(family).transformers_prefix}Model").from_pretrained(sources[family])
    casan, info = casan_class(family, "base").from_pretrained(
        sources[family], context_type="deep_global", output_loading_info=True
    )
    # Only the mixers are new: under `attention.self` in the BERT-style layers, `attn` in ModernBERT's.
    assert info["missing_keys"] and all(CONTEXT_MIXER_MODULE in key for key in info["missing_keys"])
    assert not info["unexpected_keys"] and not info["mismatched_keys"]
    assert casan.config.model_type == f"casan_{family}" and casan.name_or_path == ""
    pad_token_id = source.config.pad_token_id
    input_ids, attention_mask = padded_batch([9, 5, 7], vocab_size=source.config.vocab_size, pad_token_id=pad_token_id)
    real = attention_mask.bool()
    with torch.no_grad():
        reference = source.eval()(input_ids, attention_mask=attention_mask).last_hidden_state[real]
        diff = casan.eval()(input_ids, attention_mask=attention_mask).last_hidden_state[real] - reference
    # At the default gate (sigmoid(-4) = 0.018) the context moves the random tiny models by about 1%.
    assert 0 < (diff.norm() / reference.norm()).item() <= 0.05


@pytest.fixture(scope="module")
def run_glue_module():
    return load_script("run_glue")


@pytest.mark.parametrize("family", OTHER_FAMILIES)
def test_run_glue_fine_tunes_every_family(sources, family, run_glue_module, glue_dir, tmp_path, monkeypatch):
    """RoBERTa's tokenizer returns no token type ids; ELECTRA's embeddings are narrower than its layers."""
    output_dir = tmp_path / "out"
    args = ["--model_name_or_path", sources[family], "--context_type", "global", "--task_name", "mrpc",
            "--glue_dir", glue_dir, "--do_train", "--do_eval", "--max_steps", "2", "--output_dir", output_dir,
            *TINY_RUN]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["run_glue.py", *map(str, args)])
    run_glue_module.main()
    config = read_json(output_dir / "config.json")
    assert config["model_type"] == f"casan_{family}" and config["context_type"] == "global"
    assert config["architectures"] == [get_family(family).class_name(get_head("sequence-classification"))]
    assert "eval_accuracy" in read_json(output_dir / "all_results.json")
    assert f"- {family}" in (output_dir / "README.md").read_text()
    model = transformers.AutoModelForSequenceClassification.from_pretrained(output_dir)
    assert type(model) is casan_class(family, "sequence-classification")


def test_baseline_is_the_family_s_own_model(sources, run_glue_module, glue_dir, tmp_path, monkeypatch):
    output_dir = tmp_path / "baseline"
    args = ["--model_name_or_path", sources["roberta"], "--baseline", "--task_name", "mrpc", "--glue_dir", glue_dir,
            "--do_train", "--max_steps", "1", "--output_dir", output_dir, *TINY_RUN]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["run_glue.py", *map(str, args)])
    run_glue_module.main()
    assert read_json(output_dir / "config.json")["architectures"] == ["RobertaForSequenceClassification"]


def test_a_checkpoint_of_another_family_is_refused(sources):
    with pytest.raises(ValueError, match="'roberta'; CASAN bert models load 'bert' or 'casan_bert'"):
        casan_class("bert", "base").from_pretrained(sources["roberta"])
    roberta = casan_class("roberta", "base")
    with pytest.raises(ValueError, match="'electra'; CASAN roberta models load 'roberta' or 'casan_roberta'"):
        roberta.from_pretrained(sources["electra"])
    with pytest.raises(ValueError, match="CasanRobertaModel takes a CasanRobertaConfig .*'casan_bert'"):
        roberta(tiny_config("bert"))
    with pytest.raises(ValueError, match="model_type 't5'; CASAN models load 'bert', 'casan_bert', 'roberta'"):
        get_family("t5")
    with pytest.raises(ValueError, match="summary_type 'first'.*got 'last'"):
        CasanElectraConfig(summary_type="last")


def test_converter_writes_a_folder_of_the_checkpoint_s_family(sources, tmp_path, capsys):
    """An ELECTRA discriminator has no generator head: converted for fill-mask, that head starts random."""
    convert = load_script("convert_bert_to_casan").main
    convert(["--model_name_or_path", sources["electra"], "--output_dir", str(tmp_path / "mlm"), "--head", "masked-lm"])
    assert read_json(tmp_path / "mlm" / "config.json")["architectures"] == ["CasanElectraForMaskedLM"]
    assert "`generator_predictions.dense.*`" in capsys.readouterr().err
    convert(["--model_name_or_path", sources["roberta"], "--output_dir", str(tmp_path / "cls"),
             "--head", "sequence-classification", "--num_labels", "3", "--context_type", "deep"])  # fmt: skip
    config = read_json(tmp_path / "cls" / "config.json")
    assert config["model_type"] == "casan_roberta" and config["context_type"] == "deep"
    assert config["auto_map"]["AutoModelForSequenceClassification"].endswith("CasanRobertaForSequenceClassification")
    convert(["--model_name_or_path", sources["deberta-v2"], "--output_dir", str(tmp_path / "deberta"),
             "--head", "multiple-choice", "--context_type", "global"])  # fmt: skip
    config = read_json(tmp_path / "deberta" / "config.json")
    assert config["model_type"] == "casan_deberta-v2" and config["architectures"] == [
        "CasanDebertaV2ForMultipleChoice"
    ]
    assert {"configuration_casan_deberta_v2.py", "modeling_casan_deberta_v2.py"} <= {
        path.name for path in (tmp_path / "deberta").iterdir()
    }


def test_converter_writes_a_modernbert_folder(sources, tmp_path, capsys):
    """ModernBERT's base checkpoint has no prediction head: converted for fill-mask, `head` starts random and the
    decoder is tied to the token embeddings."""
    convert = load_script("convert_bert_to_casan").main
    convert(["--model_name_or_path", sources["modernbert"], "--output_dir", str(tmp_path / "mlm"),
             "--head", "masked-lm", "--context_type", "global"])  # fmt: skip
    config = read_json(tmp_path / "mlm" / "config.json")
    assert config["architectures"] == ["CasanModernBertForMaskedLM"] and config["model_type"] == "casan_modernbert"
    assert "`head.dense.*`" in capsys.readouterr().err
    model = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "mlm")
    assert model.decoder.weight is model.model.embeddings.tok_embeddings.weight


def empty_input_model(family, shape):
    """A tiny model of `family` (or the translation model, "marian") with deep context, and input ids of `shape` for
    it."""
    input_ids = torch.zeros(shape, dtype=torch.long)
    if family == "marian":
        model = CasanMarianMTModel(CasanMarianConfig(**TINY_MARIAN, context_type="deep"))
        return model, {"input_ids": input_ids, "decoder_input_ids": torch.zeros(shape[0], 3, dtype=torch.long)}
    return casan_class(family, "base")(tiny_config(family, context_type="deep")), {"input_ids": input_ids}


# An empty batch, and sentences without a token: what each is refused with.
EMPTY_INPUTS = {
    (0, 6): r"^The batch is empty: input_ids has shape \(0, 6\), no sentence",
    (2, 0): r"^The sentences are empty: input_ids has shape \(2, 0\), no token",
}


@pytest.mark.parametrize("shape", EMPTY_INPUTS)
@pytest.mark.parametrize("family", [*(family.name for family in FAMILIES), "marian"])
def test_an_empty_batch_or_empty_sentences_are_refused_before_any_work(family, shape):
    """Input ids of shape (0, n) or (batch, 0): one line that says what is empty, before the embeddings run (each
    failed inside a layer with "cannot reshape tensor of 0 elements", whatever the context kind). Every encoder
    checks its inputs first, before its context kind plays any part, so one kind (deep) stands for all."""
    model, inputs = empty_input_model(family, shape)

    def embedded(*_):
        raise AssertionError("the empty input was embedded")

    model.get_input_embeddings().register_forward_pre_hook(embedded)
    with pytest.raises(ValueError, match=EMPTY_INPUTS[shape]):
        model(**inputs)


@pytest.mark.parametrize(
    ("family", "head"),
    [(family.name, head) for family in (*FAMILIES, *CAUSAL_FAMILIES) for head in family.heads],
    ids=lambda value: getattr(value, "name", value),
)
def test_weights_filled_in_by_from_pretrained_are_initialised_as_the_source_class_does(family, head):
    """Every weight `from_pretrained` finds no value for is drawn as the source class draws it (the spread of each
    tensor and its mean within four times the sampling error of their difference): the per-module initialisations
    transformers skips for classes of custom code, ModernBERT's and GPT-2's output projections scaled down with
    depth, included. A large `initializer_range` makes a lost scaling plain."""
    source_config = (tiny_causal_source_config if get_family(family).causal else tiny_source_config)(
        family, initializer_range=0.5
    )
    config = FAMILY_CONFIGS[family](**source_config.to_dict(), context_type="none")
    torch.manual_seed(0)
    model = casan_class(family, head.name).from_pretrained(None, config=config, state_dict={})
    source_class = getattr(transformers, get_family(family).source_class_name(head))
    source = source_class.from_pretrained(None, config=source_config, state_dict={})
    weights = dict(model.named_parameters(remove_duplicate=False))  # tied weights under each of their names
    assert weights.keys() == dict(source.named_parameters(remove_duplicate=False)).keys()
    for name, expected in source.named_parameters(remove_duplicate=False):
        actual, expected = weights[name].float(), expected.float()
        if expected.numel() > 1:
            # six times the sampling error of a spread or a mean of `numel` draws: over four that of their difference
            error = 6 / expected.numel() ** 0.5
            spread = expected.std().item()
            assert actual.std().item() == pytest.approx(spread, rel=error, abs=1e-6), name
            assert actual.mean().item() == pytest.approx(expected.mean().item(), abs=error * spread + 1e-6), name
