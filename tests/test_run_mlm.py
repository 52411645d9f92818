"""scripts/run_mlm.py: continued masked-LM pre-training of CASAN and its BERT twin, on text files or GLUE
training sentences, with frozen-base and unfreeze modes, resuming, the Hub folder, and bad input."""

import logging
import sys

import pytest
import torch
from conftest import load_script
from data_files import write_examples
from fresh_process import run_without_casan_hf
from glue_helpers import TINY_RUN, card_metadata, make_tiny_bert, make_tiny_source, read_json, run_glue
from safetensors.torch import load_file

from casan_hf import CasanForMaskedLM
from casan_hf.training import is_new_parameter


TINY_MLM = ["--max_seq_length", "32", "--per_device_train_batch_size", "8", "--per_device_eval_batch_size", "8",
            "--report_to", "none", "--logging_steps", "1",
            "--validation_split_percentage", "25", "--save_strategy", "no"]  # fmt: skip


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory, minilm_path):
    """A BERT encoder without an MLM head, as sentence encoders come."""
    return make_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), minilm_path)


@pytest.fixture
def run_mlm(monkeypatch):
    module = load_script("run_mlm")

    def run(args):
        monkeypatch.setattr(sys, "argv", ["run_mlm.py", *map(str, args)])
        module.main()

    return run


def source_weights(folder):
    return load_file(f"{folder}/model.safetensors")


@pytest.mark.parametrize("flags", [["--context_type", "global"], ["--baseline"]], ids=["casan", "baseline"])
def test_casan_and_its_twin_train_and_report_perplexity(run_mlm, tiny_bert, text_file, tmp_path, flags, caplog):
    output_dir = tmp_path / "out"
    transformers_log = []  # transformers' loggers do not reach the root logger, which caplog reads
    handler = logging.Handler()
    handler.emit = lambda record: transformers_log.append(record.getMessage())
    logging.getLogger("transformers").addHandler(handler)
    run_mlm(["--model_name_or_path", tiny_bert, "--train_file", text_file, "--do_train", "--do_eval",
             "--max_steps", "2", "--output_dir", output_dir, *flags, *TINY_MLM])  # fmt: skip
    assert "The source checkpoint has no weights for `cls.predictions.*`" in caplog.text
    # The console's summary of the run; no transformers warning that the checkpoint "seems corrupted".
    assert "run_mlm.py:\n  model     " in caplog.text and "  training  2 steps of " in caplog.text
    logging.getLogger("transformers").removeHandler(handler)
    assert not [message for message in transformers_log if "seem corrupted" in message], transformers_log
    results = read_json(output_dir / "eval_results.json")
    assert results["perplexity"] > 1 and results["eval_samples"] == 9  # 25% of 35 sentences, empty lines dropped
    config = read_json(output_dir / "config.json")
    casan = flags[0] != "--baseline"
    assert config["architectures"] == (["CasanForMaskedLM"] if casan else ["BertForMaskedLM"])
    card = (output_dir / "README.md").read_text()
    assert "the masked-lm head started random and has learnt only in the training steps below" in card
    assert ("| layer | mean lambda_Q |" in card) == casan
    (result,) = card_metadata(output_dir)["model-index"][0]["results"]
    assert result["task"]["type"] == "fill-mask" and result["metrics"][0]["type"] == "perplexity"
    history = read_json(output_dir / "trainer_state.json")["log_history"]
    assert any("gates/layer_1/key" in entry for entry in history) == casan


def test_a_modernbert_checkpoint_trains_with_its_tied_decoder(run_mlm, text_file, tmp_path, minilm_path, glue_dir):
    """ModernBERT's base checkpoint converts to its masked LM (a random prediction head, the decoder tied to the token
    embeddings) and trains; the folder loads as CasanModernBertForMaskedLM."""
    source = make_tiny_source(tmp_path / "modernbert", "modernbert", minilm_path, glue_dir)
    output_dir = tmp_path / "out"
    run_mlm(["--model_name_or_path", source, "--train_file", text_file, "--do_train", "--do_eval",
             "--max_steps", "2", "--output_dir", output_dir, "--context_type", "deep", *TINY_MLM])  # fmt: skip
    assert read_json(output_dir / "eval_results.json")["perplexity"] > 1
    config = read_json(output_dir / "config.json")
    assert config["architectures"] == ["CasanModernBertForMaskedLM"] and config["context_type"] == "deep"


def test_frozen_base_leaves_every_pretrained_weight_bit_identical(run_mlm, tiny_bert, text_file, tmp_path):
    output_dir = tmp_path / "frozen"
    run_mlm(["--model_name_or_path", tiny_bert, "--train_file", text_file, "--do_train", "--max_steps", "2",
             "--context_type", "deep", "--train_only_new_parameters", "--learning_rate", "1e-2",
             "--output_dir", output_dir, *TINY_MLM])  # fmt: skip
    before, after = source_weights(tiny_bert), source_weights(output_dir)
    pretrained = [name for name in after if not is_new_parameter(name) and f"{name.removeprefix('bert.')}" in before]
    assert len(pretrained) > 10
    for name in pretrained:
        assert torch.equal(after[name], before[name.removeprefix("bert.")]), name
    assert after["cls.predictions.bias"].abs().sum() > 0  # the head trained (it starts at zero)


def test_unfreezing_lets_the_pretrained_weights_train(run_mlm, tiny_bert, text_file, tmp_path):
    output_dir = tmp_path / "unfrozen"
    run_mlm(["--model_name_or_path", tiny_bert, "--train_file", text_file, "--do_train", "--max_steps", "3",
             "--context_type", "global", "--train_only_new_parameters", "--unfreeze_after_steps", "1",
             "--learning_rate", "1e-2", "--output_dir", output_dir, *TINY_MLM])  # fmt: skip
    before, after = source_weights(tiny_bert), source_weights(output_dir)
    name = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(after[f"bert.{name}"], before[name])


def test_whole_word_masking_trains(run_mlm, tiny_bert, text_file, tmp_path):
    """The collator needs the words' offsets, which Trainer must not drop as unknown to the model."""
    run_mlm(["--model_name_or_path", tiny_bert, "--train_file", text_file, "--do_train", "--max_steps", "1",
             "--context_type", "global", "--whole_word_mask", "--output_dir", tmp_path / "wwm",
             *TINY_MLM])  # fmt: skip
    assert read_json(tmp_path / "wwm" / "trainer_state.json")["global_step"] == 1


def test_an_interrupted_run_resumes(run_mlm, tiny_bert, text_file, tmp_path, caplog):
    output_dir = tmp_path / "resume"
    common = ["--model_name_or_path", tiny_bert, "--train_file", text_file, "--do_train", "--context_type", "global",
              "--output_dir", output_dir, *TINY_MLM, "--save_strategy", "steps", "--save_steps", "1"]  # fmt: skip
    run_mlm([*common, "--max_steps", "2"])
    run_mlm([*common, "--max_steps", "3"])
    assert f"Resuming from {output_dir / 'checkpoint-2'} (step 2 of 3); to train from the start" in caplog.text
    assert read_json(output_dir / "trainer_state.json")["global_step"] == 3


LOAD = """
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification
for auto_class in (AutoModelForMaskedLM, AutoModelForSequenceClassification):
    model = auto_class.from_pretrained("mlm", trust_remote_code=True)
    print(type(model).__name__, type(model).__module__.split(".")[0])
"""


def test_the_continued_folder_fine_tunes_and_loads_without_casan_hf(run_mlm, tiny_bert, text_file, tmp_path, glue_dir):
    run_mlm(["--model_name_or_path", tiny_bert, "--train_file", text_file, "--do_train", "--max_steps", "1",
             "--context_type", "deep_global", "--output_dir", tmp_path / "mlm", *TINY_MLM])  # fmt: skip
    result = run_glue(["--model_name_or_path", tmp_path / "mlm", "--task_name", "rte", "--glue_dir", glue_dir,
                       "--do_train", "--max_steps", "1", "--output_dir", tmp_path / "glue", *TINY_RUN],
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert read_json(tmp_path / "glue" / "config.json")["context_type"] == "deep_global"
    assert run_without_casan_hf(LOAD, tmp_path).split() == [
        "CasanForMaskedLM", "transformers_modules", "CasanForSequenceClassification", "transformers_modules",
    ]  # fmt: skip
    assert CasanForMaskedLM.from_pretrained(tmp_path / "mlm").config.context_type == "deep_global"


def test_glue_text_is_the_training_sentences_only(glue_dir):
    module = load_script("run_mlm")
    texts = module.load_texts(module.DataArguments(glue_dir=str(glue_dir), glue_tasks=["rte"]), cache_dir=None)
    train_rows = sum(1 for _ in open(glue_dir / "RTE" / "train.tsv", encoding="utf-8")) - 1
    assert len(texts) == 2 * train_rows  # both sentences of every training pair, no dev sentence


@pytest.mark.parametrize(
    "flags, message",
    [
        ([], "Give exactly one source of text"),
        (["--train_file", "t.txt", "--glue_dir", "g", "--glue_tasks", "rte"], "Give exactly one source of text"),
        (["--train_file", "missing.txt"], "--train_file 'missing.txt' does not exist"),
        (["--train_file", "t.parquet"], "must end in one of .txt, .csv, .tsv, .json, .jsonl"),
        (["--train_file", "TEXT", "--unfreeze_after_steps", "2"], "--unfreeze_after_steps needs --train_only_new"),
    ],
)
def test_bad_input_stops_before_training(run_mlm, tiny_bert, text_file, tmp_path, flags, message, capsys):
    flags = [str(text_file) if flag == "TEXT" else flag for flag in flags]
    with pytest.raises(SystemExit) as exit_info:
        run_mlm(["--model_name_or_path", tiny_bert, *flags, "--do_train", "--output_dir", tmp_path / "out", *TINY_MLM])
    assert message in f"{exit_info.value.code} {capsys.readouterr().err}"  # a usage error, or run_mlm.py: error
    assert not (tmp_path / "out").exists()


MISSING = object()  # a JSON row without the text column
GOOD_TEXTS = ["a fine film", "slow and dull"]


def write_texts(path, texts, column="text"):
    """`texts` under `column` beside an id column, one example a row (MISSING: none in that row)."""
    return write_examples(
        path, [{"id": index, **({} if text is MISSING else {column: text})} for index, text in enumerate(texts)]
    )


@pytest.mark.parametrize(
    "suffix, text, shown",
    [
        (".csv", "", "''"),
        (".csv", "  ", "'  '"),
        (".jsonl", "  ", "'  '"),
        (".jsonl", None, "null"),
        (".jsonl", MISSING, "missing"),
        (".jsonl", ["a", "list"], r"\['a', 'list'\]"),
        (".jsonl", {"a": "dict"}, r"\{'a': 'dict'\}"),
        (".jsonl", 5, "5"),
        (".jsonl", True, "True"),
        (".jsonl", float("nan"), "nan"),
        (".json", None, "null"),
        (".json", ["a", "list"], r"\['a', 'list'\]"),
    ],
    ids=lambda value: None if value is MISSING else str(value),
)
def test_a_text_file_row_without_one_text_is_refused_in_one_line(tmp_path, suffix, text, shown):
    module = load_script("run_mlm")
    path = write_texts(tmp_path / f"texts{suffix}", [*GOOD_TEXTS, text])
    where = {".csv": "line 4", ".jsonl": "line 3", ".json": "example 3"}[suffix]
    with pytest.raises(ValueError, match=rf"^'{path}' {where} has no text in column 'text' \({shown}\): write its"):
        module.load_texts(module.DataArguments(train_file=str(path)), cache_dir=str(tmp_path / "cache"))


def test_nan_and_na_in_a_csv_text_column_are_text(tmp_path):
    module = load_script("run_mlm")
    path = write_texts(tmp_path / "texts.csv", [*GOOD_TEXTS, "NaN", "NA"], column="sentence")
    data_args = module.DataArguments(train_file=str(path), text_column="sentence")
    assert module.load_texts(data_args, cache_dir=str(tmp_path / "cache"))["text"] == [*GOOD_TEXTS, "NaN", "NA"]


def test_a_text_column_the_file_lacks_is_refused_though_it_has_a_text_column(tmp_path):
    module = load_script("run_mlm")
    path = tmp_path / "texts.csv"
    path.write_text("text\na fine film\nslow and dull\n")
    data_args = module.DataArguments(train_file=str(path), text_column="sentence")
    with pytest.raises(ValueError, match=r"The text has no column 'sentence'; it has \['text'\]"):
        module.load_texts(data_args, cache_dir=str(tmp_path / "cache"))


def test_the_held_out_text_is_masked_once_and_alike_for_every_run(minilm_path, text_file):
    from transformers import AutoTokenizer, TrainingArguments

    from casan_hf.cli.launch import ScalingArguments

    module = load_script("run_mlm")
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    data_args = module.DataArguments(train_file=str(text_file), validation_split_percentage=25)
    training_args = TrainingArguments(output_dir="unused", seed=7, report_to="none")
    scaling_args = ScalingArguments()
    texts = module.load_texts(data_args, cache_dir=None)
    first, second = (
        module.tokenize(texts, tokenizer, data_args, scaling_args, training_args)["validation"] for _ in range(2)
    )
    assert first["labels"] == second["labels"] and first["input_ids"] == second["input_ids"]
    assert any(label != -100 for row in first["labels"] for label in row)  # something is masked
    batch = module.collator_for(tokenizer, data_args, scaling_args, training_args)([first[0], first[1]])
    assert batch["labels"][0, : len(first[0]["labels"])].tolist() == first[0]["labels"]  # passed through


def test_pad_to_multiple_of_pads_every_batch_and_the_held_out_text_keeps_its_lengths(minilm_path, text_file):
    from transformers import AutoTokenizer, TrainingArguments

    from casan_hf.cli.launch import ScalingArguments

    module = load_script("run_mlm")
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    data_args = module.DataArguments(train_file=str(text_file), validation_split_percentage=25)
    training_args = TrainingArguments(output_dir="unused", seed=7, report_to="none")
    scaling_args = ScalingArguments(pad_to_multiple_of=16)
    splits = module.tokenize(module.load_texts(data_args, None), tokenizer, data_args, scaling_args, training_args)
    assert all(len(row["input_ids"]) == len(row["attention_mask"]) < 16 for row in splits["validation"])
    collator = module.collator_for(tokenizer, data_args, scaling_args, training_args)
    for split in ("train", "validation"):
        batch = collator([splits[split][index] for index in range(3)])
        assert batch["input_ids"].shape[1] == batch["labels"].shape[1] == 16
