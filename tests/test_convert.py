"""scripts/convert_bert_to_casan.py: BERT in, Hub-ready CASAN folder out, never over someone's files."""

import logging
import subprocess
import sys

import pytest
import torch
from conftest import HUB_MODEL_FILES, load_script
from glue_helpers import CONVERT, card_metadata, make_tiny_bert, read_json
from transformers import AutoTokenizer, BertModel

from casan_hf import CasanForMaskedLM, CasanForSequenceClassification, CasanModel


def convert(*args, cwd):
    return subprocess.run(
        [sys.executable, str(CONVERT), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def convert_main():
    """The script's main(argv), run in this process: usage errors cost no interpreter start-up."""
    return load_script("convert_bert_to_casan").main


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory, minilm_path):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), minilm_path)


def test_real_minilm_converts_to_a_hub_folder(minilm_path, tmp_path):
    output_dir = tmp_path / "minilm-casan-global"
    result = convert(
        "--model_name_or_path",
        minilm_path,
        "--output_dir",
        output_dir,
        "--context_type",
        "global",
        "--head",
        "sequence-classification",
        "--num_labels",
        "3",
        "--base_model",
        "sentence-transformers/all-MiniLM-L6-v2",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    files = {path.name for path in output_dir.iterdir()}
    assert HUB_MODEL_FILES | {"configuration_casan.py", "modeling_casan.py"} <= files
    config = read_json(output_dir / "config.json")
    assert config["model_type"] == "casan_bert" and config["context_type"] == "global" and len(config["id2label"]) == 3
    assert len(config["auto_map"]) == 7
    meta = card_metadata(output_dir)
    assert (
        meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
        and meta["pipeline_tag"] == "text-classification"
    )
    assert {"casan", "casan-global"} <= set(meta["tags"]) and "model-index" not in meta  # nothing measured yet
    assert "trust_remote_code=True" in (output_dir / "README.md").read_text()
    # The BERT weights arrive unchanged.
    bert = BertModel.from_pretrained(minilm_path, add_pooling_layer=False)
    casan = CasanModel.from_pretrained(output_dir)
    torch.testing.assert_close(
        casan.embeddings.word_embeddings.weight, bert.embeddings.word_embeddings.weight, rtol=0, atol=0
    )
    assert AutoTokenizer.from_pretrained(output_dir).vocab == AutoTokenizer.from_pretrained(minilm_path).vocab


def test_refuses_a_non_empty_folder_unless_told(convert_main, tiny_bert, tmp_path, capsys):
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    (output_dir / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as exit_info:
        convert_main(["--model_name_or_path", tiny_bert, "--output_dir", str(output_dir)])
    assert exit_info.value.code == 2
    assert (
        f"error: Output folder '{output_dir}' already exists and is not empty; pass --overwrite"
        in capsys.readouterr().err
    )
    assert [path.name for path in output_dir.iterdir()] == ["notes.txt"]
    convert_main(
        [
            "--model_name_or_path",
            tiny_bert,
            "--output_dir",
            str(output_dir),
            "--overwrite",
            "--context_type",
            "deep",
            "--context_rank",
            "4",
            "--head",
            "masked-lm",
        ]
    )
    config = read_json(output_dir / "config.json")
    assert (config["context_type"], config["context_rank"], config["architectures"]) == (
        "deep",
        4,
        ["CasanForMaskedLM"],
    )
    assert card_metadata(output_dir)["pipeline_tag"] == "fill-mask" and (output_dir / "notes.txt").exists()


def test_pooling_options_reach_the_classifier(convert_main, tiny_bert, tmp_path):
    output_dir = tmp_path / "out"
    convert_main(
        [
            "--model_name_or_path",
            tiny_bert,
            "--output_dir",
            str(output_dir),
            "--head",
            "sequence-classification",
            "--classifier_pooling",
            "structured",
            "--pooling_hops",
            "3",
            "--pooling_hidden",
            "16",
        ]
    )
    config = read_json(output_dir / "config.json")
    assert (config["classifier_pooling"], config["pooling_hops"], config["pooling_hidden"]) == ("structured", 3, 16)
    model = CasanForSequenceClassification.from_pretrained(output_dir)
    assert model.pooling.hops.weight.shape == (3, 16) and model.bert.pooler is None
    card = (output_dir / "README.md").read_text()
    assert "| classifier_pooling | `structured` |" in card and "| pooling_hops | `3` |" in card


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--context_type", "local"], "argument --context_type: invalid choice: 'local'"),
        (["--head", "seq2seq"], "argument --head: invalid choice: 'seq2seq'"),
        (["--context_rank", "0"], "argument --context_rank: must be a positive integer, got 0"),
        (
            ["--num_labels", "3"],
            "--num_labels needs --head sequence-classification or token-classification, not 'base'",
        ),
        (
            ["--gate", "fixed", "--fixed_gate", "1.5"],
            "`fixed_gate` must be a number in [0, 1] (a mixing weight); got 1.5",
        ),
        (
            ["--classifier_pooling", "structured"],
            "--classifier_pooling needs --head sequence-classification or multiple-choice, not 'base'",
        ),
        (
            ["--head", "sequence-classification", "--classifier_pooling", "attention"],
            "argument --classifier_pooling: invalid choice: 'attention'",
        ),
        (
            ["--head", "multiple-choice", "--pooling_hops", "0"],
            "argument --pooling_hops: must be a positive integer, got 0",
        ),
        (
            ["--head", "sequence-classification", "--pooling_penalty", "-1"],
            "`pooling_penalty` must be a number in [0, 1000]",
        ),
        (["--context-type", "global"], "unrecognized arguments: --context-type global"),
    ],
)
def test_bad_flags_are_usage_errors(flags, message, convert_main, tiny_bert, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        convert_main(["--model_name_or_path", tiny_bert, "--output_dir", str(tmp_path / "out"), *flags])
    stderr = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in stderr and "usage:" in stderr
    assert not (tmp_path / "out").exists()


def test_a_head_the_checkpoint_lacks_is_announced_in_the_output_and_the_card(
    convert_main, tiny_bert, tmp_path, capsys
):
    """A BERT encoder has no MLM head: converted for fill-mask, that head starts random, and the user is told."""
    convert_main(["--model_name_or_path", tiny_bert, "--output_dir", str(tmp_path / "mlm"), "--head", "masked-lm"])
    stderr = capsys.readouterr().err
    message = "The source checkpoint has no weights for `cls.predictions.*`: the masked-lm head starts random"
    assert f"WARNING: {message}" in stderr and "fill-mask predicts random words" in stderr
    assert message in (tmp_path / "mlm" / "README.md").read_text()
    convert_main(["--model_name_or_path", tiny_bert, "--output_dir", str(tmp_path / "base")])
    assert "WARNING" not in capsys.readouterr().err
    assert "starts random" not in (tmp_path / "base" / "README.md").read_text()


SENTENCES = [
    "A man is playing a guitar on the stage tonight.",
    "The new movie is awful.",
    "Two dogs run across a snowy field while children watch.",
    "Stocks fell sharply after the announcement.",
]


@pytest.mark.parametrize("context_type, min_cosine", [("global", 0.999), ("deep", 0.999), ("deep_global", 0.998)])
def test_sentence_transformers_pipeline_is_kept(convert_main, minilm_path, tmp_path, context_type, min_cosine):
    """all-MiniLM-L6-v2 is a sentence-transformers model (mean pooling, normalisation): the converted folder
    runs the same pipeline on the CASAN encoder, whose embeddings start next to the original's."""
    from sentence_transformers import SentenceTransformer

    output_dir = tmp_path / context_type
    torch.manual_seed(0)
    convert_main(["--model_name_or_path", minilm_path, "--output_dir", str(output_dir), "--context_type", context_type,
                  "--sentence_transformers"])  # fmt: skip
    converted = SentenceTransformer(str(output_dir), device="cpu", trust_remote_code=True)
    assert [type(module).__name__ for module in converted] == ["Transformer", "Pooling", "Normalize"]
    assert type(converted[0].model).__name__ == "CasanModel"
    original = SentenceTransformer(minilm_path, device="cpu").encode(SENTENCES, convert_to_tensor=True)
    cosine = torch.nn.functional.cosine_similarity(converted.encode(SENTENCES, convert_to_tensor=True), original)
    assert cosine.min() >= min_cosine, cosine


@pytest.mark.parametrize(
    "family, casan_model", [("deberta-v2", "CasanDebertaV2Model"), ("modernbert", "CasanModernBertModel")]
)
def test_a_sentence_transformers_pipeline_on_another_family_is_kept(
    convert_main, minilm_path, glue_dir, tmp_path, family, casan_model
):
    """A sentence-transformers model on a DeBERTa-v2 or ModernBERT encoder (tiny, random) converts as MiniLM's does:
    the folder runs its pooling and normalisation on the family's CASAN base model, whose embeddings start next
    to the source's."""
    from glue_helpers import make_tiny_source
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    encoder = Transformer(make_tiny_source(tmp_path / family, family, minilm_path, glue_dir))
    modules = [encoder, Pooling(encoder.get_embedding_dimension(), "mean"), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(tmp_path / "source"))
    torch.manual_seed(0)
    convert_main(["--model_name_or_path", str(tmp_path / "source"), "--output_dir", str(tmp_path / "casan"),
                  "--context_type", "deep_global", "--sentence_transformers"])  # fmt: skip
    converted = SentenceTransformer(str(tmp_path / "casan"), device="cpu", trust_remote_code=True)
    assert [type(module).__name__ for module in converted] == ["Transformer", "Pooling", "Normalize"]
    assert type(converted[0].model).__name__ == casan_model
    original = SentenceTransformer(str(tmp_path / "source"), device="cpu").encode(SENTENCES, convert_to_tensor=True)
    cosine = torch.nn.functional.cosine_similarity(converted.encode(SENTENCES, convert_to_tensor=True), original)
    assert cosine.min() >= 0.99, cosine


def test_sentence_transformers_needs_a_sentence_transformers_source(convert_main, tiny_bert, tmp_path, capsys):
    with pytest.raises(SystemExit):
        convert_main(
            ["--model_name_or_path", tiny_bert, "--output_dir", str(tmp_path / "out"), "--sentence_transformers"]
        )
    assert "is not a sentence-transformers model: it has no modules.json" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(SystemExit):
        convert_main(["--model_name_or_path", tiny_bert, "--output_dir", str(tmp_path / "out"), "--head", "masked-lm",
                      "--sentence_transformers"])  # fmt: skip
    assert "--sentence_transformers needs --head base (the encoder), not 'masked-lm'" in capsys.readouterr().err


def test_untrained_heads_are_named_once_per_module():
    from casan_hf.hub import untrained_heads

    missing = ["classifier.weight", "classifier.bias", "bert.encoder.layer.0.attention.self.context_mixer.gate_bias"]
    assert untrained_heads(missing) == ["classifier"]
    assert untrained_heads(["cls.predictions.bias", "cls.predictions.transform.dense.weight"]) == ["cls.predictions"]


class Collected(logging.Handler):
    """The messages logged to the loggers it is attached to (transformers' do not reach the root logger)."""

    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def logged():
    handler = Collected()
    loggers = [logging.getLogger(name) for name in ("transformers", "casan_hf")]
    for each in loggers:
        each.addHandler(handler)
    yield handler.messages
    for each in loggers:
        each.removeHandler(handler)


def test_a_conversion_is_said_in_one_line_and_reports_only_the_unexpected(tiny_bert, logged):
    """In place of transformers' model-type warning and the LOAD REPORT rows of the context keys: one line with the
    family, the context, the new parameters and their share, how they start. The new classifier is still reported,
    and the loading info still lists every key the checkpoint lacked."""
    model, info = CasanForSequenceClassification.from_pretrained(
        tiny_bert, context_type="deep_global", output_loading_info=True
    )
    new = sum(p.numel() for name, p in model.named_parameters() if ".context_mixer." in name)
    (line,) = [message for message in logged if message.startswith("Converted")]
    assert line == (
        f"Converted the bert checkpoint {tiny_bert} to CasanForSequenceClassification ('deep_global' context): "
        f"{new:,} new parameters ({100 * new / model.num_parameters():.2f}% of {model.num_parameters():,}), the "
        "context gates at sigmoid(-4.0) = 0.018, so the model's outputs start near the source's, not equal to them."
    )
    assert not any("You are using a model of type" in message for message in logged)
    (report,) = [message for message in logged if "LOAD REPORT" in message]
    assert "classifier.weight" in report and "context_mixer" not in report
    assert {key for key in info["missing_keys"] if ".context_mixer." in key} and "classifier.weight" in set(
        info["missing_keys"]
    )


def test_an_exact_start_says_the_outputs_equal_the_source_s(tiny_bert, logged):
    model = CasanModel.from_pretrained(
        tiny_bert, context_type="global", context_targets=[], output_gate="elementwise", output_gate_context=True
    ).eval()
    (line,) = [message for message in logged if message.startswith("Converted")]
    assert line.endswith("context): 4,160 new parameters (0.42% of 997,674), the output gate at exactly 1, so the "
                         "model's outputs equal the source's until it trains.")  # fmt: skip
    inputs = AutoTokenizer.from_pretrained(tiny_bert)(["a fine film", "dull"], padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = BertModel.from_pretrained(tiny_bert).eval()(**inputs).last_hidden_state
        assert torch.equal(model(**inputs).last_hidden_state, expected)


def test_a_local_bias_converted_with_its_scale_at_zero_is_said_to_start_exactly(tiny_bert, logged):
    model = CasanModel.from_pretrained(tiny_bert, context_type="none", local_bias="query").eval()
    (line,) = [message for message in logged if message.startswith("Converted")]
    assert line.endswith(
        "the local bias scaled by exactly 0, so the model's outputs equal the source's until it trains."
    )
    inputs = AutoTokenizer.from_pretrained(tiny_bert)(["a fine film", "dull"], padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = BertModel.from_pretrained(tiny_bert).eval()(**inputs).last_hidden_state
        assert torch.equal(model(**inputs).last_hidden_state, expected)


def test_a_masked_lm_head_the_source_lacks_is_not_called_corrupted(tiny_bert, logged):
    CasanForMaskedLM.from_pretrained(tiny_bert, context_type="global")
    assert not any("seem corrupted" in message for message in logged)
    assert sum(message.startswith("Converted") for message in logged) == 1
