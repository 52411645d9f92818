"""scripts/run_translation.py on a slice of the real Multi30k files: a tiny model and tokenizer trained from
scratch for a few steps, scored with sacreBLEU, saved as a Hub folder; a checkpoint continues; bad input stops
with one line before anything is trained."""

import json
import sys

import pytest
import torch
from conftest import HUB_MODEL_FILES, load_script
from data_files import write_examples
from fresh_process import run_without_casan_hf
from hub_server import record_uploads

from casan_hf.cli.run_start import RUN_START_NAME
from casan_hf.translation import translation_scores
from casan_hf.translation.data import load_parallel_data


TINY_RUN = [
    "--d_model", "32", "--encoder_layers", "2", "--decoder_layers", "1", "--attention_heads", "4",
    "--ffn_dim", "64", "--vocab_size", "300",
    "--per_device_train_batch_size", "8", "--per_device_eval_batch_size", "16", "--num_beams", "2",
    "--max_target_length", "16", "--max_eval_samples", "8", "--max_predict_samples", "8",
    "--report_to", "none", "--disable_tqdm", "true", "--save_strategy", "no",
]  # fmt: skip


@pytest.fixture(scope="module")
def run_translation_module():
    return load_script("run_translation")


def run_in_process(module, args):
    """run_translation's main() in this process (no start-up cost) with the given command line."""
    argv = sys.argv
    sys.argv = ["run_translation.py", *map(str, args)]
    try:
        module.main()
    finally:
        sys.argv = argv


@pytest.fixture(scope="module")
def trained(run_translation_module, multi30k_dir, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("runs") / "tiny-deep_global"
    run_in_process(
        run_translation_module,
        ["--data_dir", multi30k_dir, "--source_lang", "en", "--target_lang", "de", "--context_type", "deep_global",
         "--do_train", "--do_eval", "--do_predict", "--predict_with_generate", "--max_steps", "4",
         "--learning_rate", "1e-3", "--output_dir", output_dir, *TINY_RUN],
    )  # fmt: skip
    return output_dir


def test_run_trains_scores_and_writes_the_hub_folder(trained):
    files = {path.name for path in trained.iterdir()}
    generation_and_code = {
        "generation_config.json",
        "generated_predictions.txt",
        "configuration_casan_marian.py",
        "modeling_casan_marian.py",
        "context.py",
        "context_mixer.py",
        "configuration_casan.py",
    }
    assert HUB_MODEL_FILES | generation_and_code <= files
    config = json.loads((trained / "config.json").read_text())
    assert config["model_type"] == "casan_marian" and config["context_type"] == "deep_global"
    assert config["d_model"] == 32 and config["vocab_size"] == 300
    assert (config["encoder_layers"], config["decoder_layers"]) == (2, 1)
    results = json.loads((trained / "all_results.json").read_text())
    for key in (
        "eval_bleu",
        "eval_chrf",
        "eval_cross_entropy",
        "predict_bleu",
        "predict_chrf",
        "predict_cross_entropy",
        "train_loss",
    ):
        assert isinstance(results[key], float), key
    assert len((trained / "generated_predictions.txt").read_text().splitlines()) == 8
    card = (trained / "README.md").read_text()
    # 8 of the 120 pairs of each split: the card says so, and keeps those scores out of the model-index.
    assert "test: the first 8 of its 120 examples only" in card and "model-index:" not in card
    assert f"| test | BLEU | {results['predict_bleu']:.2f} |" in card


def test_test_scores_by_source_length_cover_every_sentence(trained):
    by_length = json.loads((trained / "predict_by_source_length.json").read_text())
    assert list(by_length) == ["1-10", "11-15", "16-20", "21+"]
    assert sum(bucket["sentences"] for bucket in by_length.values()) == 8
    assert all("bleu" in bucket for bucket in by_length.values() if bucket["sentences"])


def test_the_run_records_what_it_received_as_it_starts(trained):
    started = json.loads((trained / RUN_START_NAME).read_text())
    assert started["argv"][0] == "run_translation.py" and "--encoder_layers" in started["argv"]
    assert started["settings"]["context_type"] == "deep_global" and started["settings"]["encoder_layers"] == 2
    assert started["settings"]["gate_per_head"] is False and started["settings"]["gate_bias_init"] == -4.0
    assert started["commit"] is None or len(started["commit"].removesuffix("+changes")) == 40
    assert set(started["versions"]) == {"torch", "transformers"} and started["threads"] == torch.get_num_threads()
    assert started["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    # The data files it read, hashed: a study's tables say when two arms' data differ.
    assert len(started["data"]["sha256"]) == 64 and started["data"]["files"]
    assert all(name.endswith((".en", ".de")) for name in started["data"]["files"])


def test_a_resumed_run_keeps_its_first_start_and_lists_the_resume(
    run_translation_module, multi30k_dir, tmp_path, caplog
):
    output_dir = tmp_path / "resumed"
    first = ["--data_dir", multi30k_dir, "--context_type", "global", "--do_train", "--max_steps", "2",
             "--output_dir", output_dir, *TINY_RUN, "--save_strategy", "steps", "--save_steps", "1"]  # fmt: skip
    run_in_process(run_translation_module, first)
    checkpoint = output_dir / "checkpoint-1"
    run_in_process(
        run_translation_module,
        ["--data_dir", multi30k_dir, "--context_type", "global", "--do_train", "--max_steps", "2",
         "--resume_from_checkpoint", checkpoint, "--output_dir", output_dir, *TINY_RUN],
    )  # fmt: skip
    started = json.loads((output_dir / RUN_START_NAME).read_text())
    assert "--resume_from_checkpoint" not in started["argv"]
    [resume] = started["resumes"]
    assert resume["checkpoint"] == str(checkpoint) and "--resume_from_checkpoint" in resume["argv"]
    # The time spent up to the checkpoint, which the checkpoint kept: the resumed run is timed whole.
    assert resume["before"]["step"] == 1 and 0 < resume["before"]["train_seconds"] <= resume["before"]["wall_seconds"]
    assert json.loads((output_dir / "trainer_state.json").read_text())["global_step"] == 2
    # The console: a summary of each start, and the resume said in one line.
    assert caplog.text.count("run_translation.py:\n  model     CasanMarianMTModel") == 2, caplog.text
    assert "  data      " in caplog.text and "train 120 pairs" in caplog.text
    assert f"Resuming from {checkpoint} (step 1 of 2); to train from the start instead" in caplog.text


def test_the_context_trains_at_its_own_learning_rate(run_translation_module, multi30k_dir, tmp_path, monkeypatch):
    """run_translation is a CasanTrainer run: --context_learning_rate puts the context in param groups of its own."""
    from casan_hf.training import CasanTrainer

    rates = []
    create_optimizer = CasanTrainer.create_optimizer

    def recorded(self, model=None):
        optimizer = create_optimizer(self, model)
        rates.extend(group["lr"] for group in optimizer.param_groups)
        return optimizer

    monkeypatch.setattr(CasanTrainer, "create_optimizer", recorded)
    output_dir = tmp_path / "context-lr"
    run_in_process(
        run_translation_module,
        ["--data_dir", multi30k_dir, "--context_type", "global", "--do_train", "--max_steps", "1",
         "--learning_rate", "1e-3", "--context_learning_rate", "1e-2", "--output_dir", output_dir, *TINY_RUN],
    )  # fmt: skip
    assert 1e-2 in rates and 1e-3 in rates
    assert "| context_learning_rate | `0.01` |" in (output_dir / "README.md").read_text()


def test_push_to_hub_uploads_the_runs_own_card(run_translation_module, multi30k_dir, tmp_path, monkeypatch):
    """transformers' Trainer writes its generic card before an upload; the run's card (scores, loading code) is
    the one uploaded."""
    hub = record_uploads(monkeypatch)
    output_dir = tmp_path / "push"
    run_in_process(
        run_translation_module,
        ["--data_dir", multi30k_dir, "--context_type", "global", "--do_train", "--max_steps", "1", "--push_to_hub",
         "--hub_model_id", "you/casan-mt", "--output_dir", output_dir, *TINY_RUN],
    )  # fmt: skip
    (upload,) = hub.uploads
    card = upload["card"]
    assert upload["repo_id"] == "you/casan-mt" and card == (output_dir / "README.md").read_text()
    assert (
        "casan-global" in card
        and 'AutoModelForSeq2SeqLM.from_pretrained("you/casan-mt", trust_remote_code=True)' in card
    )


def test_the_encoders_final_gates_are_logged(trained):
    """After the last evaluation, the mean query and key gate of each encoder layer (what the study reports)."""
    history = json.loads((trained / "trainer_state.json").read_text())["log_history"]
    gates = next(entry for entry in reversed(history) if any(key.startswith("gates/") for key in entry))
    assert sorted(key for key in gates if key.startswith("gates/")) == [
        f"gates/layer_{layer}/{target}" for layer in (0, 1) for target in ("key", "query")
    ]
    assert all(0 < gates[key] < 1 for key in gates if key.startswith("gates/"))
    assert "eval_bleu" in history[-2] or any("eval_bleu" in entry for entry in history)


LOAD_AND_TRANSLATE = """
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained("run", trust_remote_code=True)
model = AutoModelForSeq2SeqLM.from_pretrained("run", trust_remote_code=True).eval()
text = "Two young, White males are outside near many bushes."
assert tokenizer.decode(tokenizer(text).input_ids, skip_special_tokens=True) == text  # detokenizes exactly
batch = tokenizer([text, "A man in a blue shirt."], return_tensors="pt", padding=True)
print(type(model).__module__.split(".")[0], len(model.generate(**batch, num_beams=2, max_new_tokens=5)))
"""


def test_the_card_lists_the_encoders_final_gates(trained):
    card = (trained / "README.md").read_text()
    assert "| layer | mean lambda_Q | mean lambda_K |" in card and "\n| 1 | " in card


def test_output_folder_translates_without_casan_hf(trained, tmp_path):
    (tmp_path / "run").symlink_to(trained)
    assert run_without_casan_hf(LOAD_AND_TRANSLATE, tmp_path).split() == ["transformers_modules", "2"]


def test_checkpoint_continues_and_keeps_its_context(run_translation_module, trained, multi30k_dir, tmp_path):
    run_in_process(
        run_translation_module,
        ["--model_name_or_path", trained, "--data_dir", multi30k_dir, "--do_eval", "--predict_with_generate",
         "--output_dir", tmp_path / "evaluated", *TINY_RUN],
    )  # fmt: skip
    assert json.loads((tmp_path / "evaluated" / "config.json").read_text())["context_type"] == "deep_global"
    assert "eval_bleu" in json.loads((tmp_path / "evaluated" / "eval_results.json").read_text())
    with pytest.raises(SystemExit, match="trained with context_type='deep_global'; it cannot be loaded with"):
        run_in_process(
            run_translation_module,
            ["--model_name_or_path", trained, "--context_type", "global", "--data_dir", multi30k_dir, "--do_eval",
             "--predict_with_generate", "--output_dir", tmp_path / "other", *TINY_RUN],
        )  # fmt: skip


def bad_data(multi30k_dir, tmp_path, case):
    """`(data arguments, the message)` of one kind of bad input."""
    if case == "missing file":
        return ["--data_dir", multi30k_dir, "--train_prefix", "training"], r"Missing train file .*training\.en'"
    if case == "different line counts":
        uneven = tmp_path / "uneven"
        uneven.mkdir()
        (uneven / "train.en").write_text("a\nb\nc\n")
        (uneven / "train.de").write_text("a\nb\n")
        return ["--data_dir", uneven], r"'.*uneven/train\.en' has 3 lines but '.*uneven/train\.de' has 2"
    if case == "unknown language pair":
        return (
            ["--data_dir", multi30k_dir, "--source_lang", "en", "--target_lang", "fr"],
            r"--data_dir '.*' does not hold the <prefix>\.<lang> layout for en-fr: no file ends in \.fr \(it holds \[",
        )
    if case == "pooling option":
        return [
            "--data_dir",
            multi30k_dir,
            "--classifier_pooling",
            "mean",
        ], r"\['classifier_pooling'\] are pooling options"
    return [
        "--data_dir",
        multi30k_dir,
    ], "Output folder .*out' already exists and is not empty; pass --overwrite_output_dir"


@pytest.mark.parametrize(
    "case", ["missing file", "different line counts", "unknown language pair", "pooling option", "non-empty output"]
)
def test_bad_input_stops_before_training(run_translation_module, multi30k_dir, tmp_path, case):
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    (output_dir / "keep.txt").write_text("mine")
    args, message = bad_data(multi30k_dir, tmp_path, case)
    overwrite = [] if case == "non-empty output" else ["--overwrite_output_dir"]
    with pytest.raises(SystemExit, match="^run_translation.py: error: " + message):
        run_in_process(
            run_translation_module,
            [*args, "--do_train", "--max_steps", "1", "--output_dir", output_dir, *overwrite, *TINY_RUN],
        )
    assert [path.name for path in output_dir.iterdir()] == ["keep.txt"]


MISSING = object()  # a JSON row without the key
GOOD_PAIRS = [{"en": "a dog runs", "de": "ein Hund rennt"}, {"en": "NA", "de": "nicht verfügbar"}]


def write_pairs(path, rows):
    """`rows` (dicts, MISSING values left out), one example a row, in the format `path`'s extension names."""
    return write_examples(path, [{key: value for key, value in row.items() if value is not MISSING} for row in rows])


def load_pairs(path):
    return load_parallel_data("en", "de", ["train"], files={"train": str(path)}, cache_dir=str(path.parent / "c"))


# The layouts of a pair file in each format: a .csv holds no objects.
LAYOUTS = [("columns", ".csv"), ("columns", ".jsonl"), ("columns", ".json"), ("translation", ".jsonl"),
           ("translation", ".json")]  # fmt: skip


@pytest.mark.parametrize("layout, suffix", LAYOUTS)
def test_pair_files_are_read_with_their_sentences_as_text(tmp_path, layout, suffix):
    rows = GOOD_PAIRS if layout == "columns" else [{"translation": pair, "id": 1} for pair in GOOD_PAIRS]
    data = load_pairs(write_pairs(tmp_path / f"pairs{suffix}", rows))
    assert data.datasets["train"]["translation"] == GOOD_PAIRS  # "NA" is a sentence, not a missing value


SENTENCE_CASES = {  # the third row's de sentence, the file's formats, how the refusal shows it
    "blank": ("  ", [".csv", ".jsonl"], "'  '"),
    "empty": ("", [".csv"], "''"),
    "null": (None, [".jsonl", ".json"], "null"),
    "missing": (MISSING, [".jsonl"], "missing"),
    "nested": (["ein", "Hund"], [".jsonl", ".json"], r"\['ein', 'Hund'\]"),
    "number": (5, [".jsonl"], "5"),
}


@pytest.mark.parametrize(
    "case, layout, suffix",
    [(case, *pair) for case, (_, formats, _) in SENTENCE_CASES.items() for pair in LAYOUTS if pair[1] in formats],
)
def test_a_pair_without_one_sentence_is_refused_in_one_line(tmp_path, case, layout, suffix):
    sentence, _, shown = SENTENCE_CASES[case]
    rows = [*GOOD_PAIRS, {"en": "a cat sleeps", "de": sentence}]
    if layout == "translation":
        rows = [{"translation": {key: value for key, value in row.items() if value is not MISSING}} for row in rows]
    path = write_pairs(tmp_path / f"pairs{suffix}", rows)
    where = {".csv": "line 4", ".jsonl": "line 3", ".json": "example 3"}[suffix]
    if layout == "translation" and case == "missing":
        message = rf"^'{path}' {where} has the translation \{{'en': 'a cat sleeps'\}}, not an object with both"
    else:
        message = rf"^'{path}' {where} has no text in column 'de' \({shown}\): write its text"
    with pytest.raises(ValueError, match=message):
        load_pairs(path)


@pytest.mark.parametrize(
    "suffix, translation, shown",
    [
        (".csv", "a dog runs = ein Hund rennt", "'a dog runs = ein Hund rennt'"),
        (".jsonl", "a dog runs", "'a dog runs'"),
        (".jsonl", ["a dog runs", "ein Hund rennt"], r"\['a dog runs', 'ein Hund rennt'\]"),
        (".jsonl", MISSING, "missing"),
        (".json", None, "null"),
    ],
)
def test_a_translation_that_is_not_an_object_with_both_languages_is_refused_in_one_line(
    tmp_path, suffix, translation, shown
):
    rows = [{"translation": pair} for pair in GOOD_PAIRS]
    if suffix == ".csv":
        rows = [{"translation": f"{pair['en']} = {pair['de']}"} for pair in GOOD_PAIRS]
    path = write_pairs(tmp_path / f"pairs{suffix}", [*rows, {"id": 3, "translation": translation}])
    where = {".csv": "line 2", ".jsonl": "line 3", ".json": "example 3"}[suffix]
    with pytest.raises(ValueError, match=rf"^'{path}' {where} has the translation {shown}, not an object with both"):
        load_pairs(path)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_file_without_a_language_is_refused_before_it_is_read(tmp_path, suffix):
    path = write_pairs(tmp_path / f"pairs{suffix}", [{"en": pair["en"], "fr": "un chien"} for pair in GOOD_PAIRS])
    with pytest.raises(ValueError, match=rf"^'{path}' needs a 'translation' column or one column per language"):
        load_pairs(path)


def test_scores_are_sacrebleu_on_detokenized_text():
    scores = translation_scores(["Ein Hund rennt im Schnee."], ["Ein Hund rennt im Schnee."])
    assert scores["bleu"] == pytest.approx(100.0) and scores["chrf"] == pytest.approx(100.0)
