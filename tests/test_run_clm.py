"""scripts/run_clm.py at tiny sizes: a Llama checkpoint converted (its validation cross-entropy the source's to the
bit before training) and trained, beside its twin; a new model from scratch with a trained tokenizer and a held-out
part of one file; the card's cross-entropy and perplexity; the gates logged at each evaluation; gradient
checkpointing trained to a plain run's weights; a run killed inside a step resumed to the unbroken run's weights; bad
input refused in one line before anything is written."""

import sys

import pytest
import torch
import transformers
from conftest import HUB_MODEL_FILES, load_script, run_main
from glue_helpers import card_metadata, read_json
from safetensors.torch import load_file
from test_kill_resume import assert_same_run, final_state, killed, script, train_loss_free

from casan_hf.modeling_casan_causal import CasanCausalPreTrainedModel
from casan_hf.studies.causal import train_byte_level_tokenizer
from casan_hf.studies.gates import final_gates


TINY = ["--block_size", "16", "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8",
        "--report_to", "none", "--disable_tqdm", "true", "--save_strategy", "no",
        "--learning_rate", "1e-3"]  # fmt: skip
NEW_LLAMA = ["--model_type", "llama", "--hidden_size", "32", "--num_hidden_layers", "2", "--num_attention_heads", "4",
             "--num_key_value_heads", "2", "--intermediate_size", "48"]  # fmt: skip


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    """A few hundred lines of dialogue, as train / validation / test files."""
    folder = tmp_path_factory.mktemp("text")
    speakers = ["ROMEO", "JULIET", "NURSE", "FRIAR"]
    lines = ["the night is young and so are we", "what light through yonder window breaks", "good night, good night"]
    paths = {}
    for index, split in enumerate(("train", "validation", "test")):
        blocks = [f"{speakers[(i + index) % 4]}:\n{lines[i % 3]}\n{lines[(i + index) % 3]} .\n" for i in range(60)]
        paths[split] = folder / f"{split}.txt"
        paths[split].write_text("\n".join(blocks))
    return paths


@pytest.fixture(scope="module")
def tokenizer_folder(texts, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tokenizer")
    tokenizer = train_byte_level_tokenizer([texts["train"].read_text()], 300, model_max_length=64)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def llama(tokenizer_folder, tmp_path_factory):
    """A tiny random transformers Llama with the tokenizer, saved: the checkpoint a user converts."""
    folder = tmp_path_factory.mktemp("llama")
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_folder)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def module():
    return load_script("run_clm")


def data(texts, *splits):
    flags = {"train": "--train_file", "validation": "--validation_file", "test": "--test_file"}
    return [item for split in splits for item in (flags[split], texts[split])]


def test_a_converted_checkpoint_scores_as_its_source_until_it_trains(module, llama, texts, tmp_path):
    """Evaluated without training, the converted model (every context kind's gates scaled by 0) and the twin give
    the same validation and test cross-entropy, to the bit."""
    scores = {}
    for name, flags in (("twin", ["--baseline"]), ("casan", ["--context_type", "deep_global"])):
        run_main(module, ["--model_name_or_path", llama, *data(texts, "validation", "test"), "--do_eval",
                         "--do_predict", "--output_dir", tmp_path / name, *flags, *TINY])  # fmt: skip
        scores[name] = (
            read_json(tmp_path / name / "eval_results.json")["eval_cross_entropy"],
            read_json(tmp_path / name / "predict_results.json")["predict_cross_entropy"],
        )
    assert scores["casan"] == scores["twin"]
    assert read_json(tmp_path / "casan" / "config.json")["architectures"] == ["CasanLlamaForCausalLM"]


@pytest.mark.parametrize("flags", [["--context_type", "global"], ["--baseline"]], ids=["casan", "baseline"])
def test_casan_and_its_twin_train_and_the_card_holds_cross_entropy_and_perplexity(
    module, llama, texts, tmp_path, flags
):
    output_dir = tmp_path / "out"
    run_main(module, ["--model_name_or_path", llama, *data(texts, "train", "validation", "test"), "--do_train",
                     "--do_eval", "--do_predict", "--max_steps", "2", "--output_dir", output_dir, *flags,
                     *TINY])  # fmt: skip
    assert read_json(output_dir / "trainer_state.json")["global_step"] == 2
    assert HUB_MODEL_FILES <= {path.name for path in output_dir.iterdir()}
    casan = flags[0] != "--baseline"
    config = read_json(output_dir / "config.json")
    assert config["architectures"] == (["CasanLlamaForCausalLM"] if casan else ["LlamaForCausalLM"])
    assert ("modeling_casan_causal.py" in {path.name for path in output_dir.iterdir()}) == casan
    metrics = {}
    for result in card_metadata(output_dir)["model-index"][0]["results"]:
        assert result["task"]["type"] == "text-generation"
        metrics[result["dataset"]["split"]] = {metric["type"]: metric["value"] for metric in result["metrics"]}
    for split, prefix in (("validation", "eval"), ("test", "predict")):
        saved = read_json(output_dir / f"{prefix}_results.json")
        assert saved[f"{prefix}_cross_entropy"] == saved[f"{prefix}_loss"]
        assert metrics[split]["cross_entropy"] == round(saved[f"{prefix}_loss"], 4)
        assert metrics[split]["perplexity"] == pytest.approx(torch.tensor(saved[f"{prefix}_loss"]).exp().item())
    card = (output_dir / "README.md").read_text()
    assert ("trust_remote_code=True" in card) == casan and "causal self-attention" in card
    assert ("| layer | mean lambda_Q |" in card) == casan
    history = read_json(output_dir / "trainer_state.json")["log_history"]
    assert any("gates/layer_1/key" in entry for entry in history) == casan


@pytest.mark.parametrize(
    "family, size",
    [("llama", NEW_LLAMA[2:]), ("gpt2", ["--hidden_size", "32", "--num_hidden_layers", "2",
                                           "--num_attention_heads", "4", "--config_overrides", "n_inner=48"])],
)  # fmt: skip
def test_a_new_model_trains_from_scratch_on_one_file_with_a_held_out_part(
    module, tokenizer_folder, texts, tmp_path, family, size
):
    output_dir = tmp_path / "out"
    run_main(module, ["--model_type", family, *size, "--tokenizer_name", tokenizer_folder, "--context_type",
                     "deep_global", "--gate_bias_init", "0", "--gate_per_head", "true", *data(texts, "train"),
                     "--validation_split_percentage", "10", "--do_train", "--do_eval", "--max_steps", "2",
                     "--sample_prompt", "ROMEO:", "--sample_max_new_tokens", "5", "--output_dir", output_dir,
                     *TINY])  # fmt: skip
    config = read_json(output_dir / "config.json")
    assert config["model_type"] == f"casan_{family}" and config["context_type"] == "deep_global"
    assert config["gate_per_head"] and config["gate_bias_init"] == 0.0 and config["context_start"] == "gate"
    assert config["vocab_size"] == 300 and config.get("max_position_embeddings", config.get("n_positions")) == 16
    assert config.get("intermediate_size", config.get("n_inner")) == 48
    results = read_json(output_dir / "eval_results.json")
    assert results["eval_samples"] == results["eval_split_samples"] > 0
    sample = read_json(output_dir / "sample.json")
    assert sample["prompt"] == "ROMEO:" and isinstance(sample["continuation"], str)
    started = read_json(output_dir / "run_start.json")
    assert sorted(started["data"]["files"]) == ["tokenizer.json", "train.txt"]
    gates = final_gates(output_dir / "trainer_state.json")  # the gate monitor's, a gate per head
    assert len(gates["query"]) == 2 and all(len(heads) == 4 for heads in gates["key_per_head"])
    assert all(0 < gate < 1 for gate in gates["query"] + gates["key"])


def test_gradient_checkpointing_trains_to_the_weights_of_a_plain_run(module, llama, texts, tmp_path, monkeypatch):
    """`--gradient_checkpointing` (transformers' non-reentrant default) on a converted Llama, each layer checkpointed
    in its forward's run: two steps end with the losses and weights of the same run without it, to the bit."""
    checkpointed_layers = []
    checkpoint_in_run = CasanCausalPreTrainedModel._checkpoint_in_run
    monkeypatch.setattr(
        CasanCausalPreTrainedModel,
        "_checkpoint_in_run",
        lambda model, *args, **kwargs: checkpointed_layers.append(model) or checkpoint_in_run(model, *args, **kwargs),
    )
    flags = ["--model_name_or_path", llama, "--context_type", "deep_global", *data(texts, "train"), "--do_train",
             "--max_steps", "2", "--logging_steps", "1", *TINY]  # fmt: skip
    runs = {}
    for name, checkpointing in (("plain", []), ("checkpointed", ["--gradient_checkpointing"])):
        run_main(module, [*flags, *checkpointing, "--output_dir", tmp_path / name])
        history = read_json(tmp_path / name / "trainer_state.json")["log_history"]
        runs[name] = (
            [record["loss"] for record in history if "loss" in record],
            load_file(tmp_path / name / "model.safetensors"),
        )
    assert len(checkpointed_layers) == 2 * 2  # two layers a step, two steps
    (plain_losses, plain_weights), (losses, weights) = runs["plain"], runs["checkpointed"]
    assert len(losses) == 2 and losses == plain_losses
    assert weights.keys() == plain_weights.keys()
    for name, tensor in plain_weights.items():
        assert torch.equal(weights[name], tensor), name


# Six steps, a checkpoint every two, dropout on: the kill comes inside step 3.
EVERY_TWO = ["--max_steps", "6", "--save_strategy", "steps", "--save_steps", "2", "--do_train", "--do_eval",
             "--logging_steps", "1", "--seed", "7", "--dataloader_pin_memory", "False",
             "--config_overrides", "attention_dropout=0.1"]  # fmt: skip


def test_a_run_killed_inside_a_step_resumes_to_the_unbroken_run(module, tokenizer_folder, texts, tmp_path):
    """Killed (SIGKILL) inside step 3, after checkpoint-2, in a process of its own; the same command, run here,
    resumes and ends with the weights, log history, evaluation and optimizer state of an unbroken run, to the bit.
    Both runs here take one thread, as the killed process does."""
    flags = [*NEW_LLAMA, "--tokenizer_name", tokenizer_folder, "--context_type", "global", "--gate_bias_init", "0",
             *data(texts, "train", "validation"), *TINY, *EVERY_TWO]  # fmt: skip
    flags = [str(flag) for flag in flags]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_main(module, [*flags, "--output_dir", tmp_path / "unbroken"])
        output_dir = tmp_path / "out"
        killed([sys.executable, script("run_clm"), *flags, "--output_dir", str(output_dir)], tmp_path, "step", 2)
        assert (output_dir / "checkpoint-2" / "trainer_state.json").exists()
        run_main(module, [*flags, "--output_dir", output_dir])
    finally:
        torch.set_num_threads(threads)
    resumed = train_loss_free(final_state(output_dir, "checkpoint-6"))
    assert_same_run(resumed, train_loss_free(final_state(tmp_path / "unbroken", "checkpoint-6")))


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--model_name_or_path", "LLAMA", "--model_type", "llama"], "--model_type shape a new model"),
        (["--model_type", "llama"], "A new model needs a tokenizer: pass --tokenizer_name"),
        (["--model_name_or_path", "LLAMA", "--train_file", "text.csv"], "--train_file 'text.csv' must be a .txt"),
        (["--model_name_or_path", "LLAMA", "--do_predict"], "--do_predict needs --test_file"),
        (["--model_name_or_path", "LLAMA", "--block_size", "65"], "--block_size 65 is longer than the model's 64"),
        (["--model_name_or_path", "LLAMA", "--baseline", "--context_type", "global"], "--baseline trains the plain"),
        (["--model_name_or_path", "LLAMA", "--local_bias", "query"], "is refused in a causal language model"),
        (["--model_type", "llama", "--tokenizer_name", "TOKENIZER", "--config_overrides", "hidden=3"],
         "--config_overrides 'hidden=3': give name=value with a field of CasanLlamaConfig"),
        (["--model_type", "gpt2", "--tokenizer_name", "TOKENIZER", "--intermediate_size", "8"],
         "--intermediate_size: a gpt2 model has no intermediate_size"),
        (["--model_name_or_path", "BERT"], "has model_type 'bert'; run_clm.py trains the causal families"),
    ],
)  # fmt: skip
def test_bad_input_stops_in_one_line_before_anything_is_written(
    module, llama, tokenizer_folder, texts, tmp_path, flags, message, capsys, minilm_path
):
    named = {"LLAMA": str(llama), "TOKENIZER": str(tokenizer_folder), "BERT": minilm_path}
    flags = [named.get(flag, flag) for flag in flags]
    if "--train_file" not in flags:
        flags += data(texts, "train")
    with pytest.raises(SystemExit) as exit_info:
        run_main(module, [*TINY, *flags, "--do_train", "--do_eval", "--output_dir", tmp_path / "out"])
    said = f"{exit_info.value.code} {capsys.readouterr().err}"
    assert message in said, said
    assert not (tmp_path / "out").exists()
