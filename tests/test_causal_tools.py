"""The tools causal-LM users reach for, on converted tiny CASAN Llama and Qwen3 checkpoints with a chat template
(docs/CAUSAL_TOOLS.md): TRL's SFTTrainer (in full and with LoRA, packed and padding-free), DPOTrainer and GRPOTrainer,
what each saves reloading in a fresh process without casan_hf; lm-evaluation-harness's log-likelihoods against the
model's own; an OpenAI-compatible chat server over real HTTP. Each tool is a pinned test dependency (constraints.txt);
a test is skipped, naming the package, only where it is not installed."""

import json
import os
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import transformers
from fresh_process import run_without_casan_hf
from local_server import free_port, wait_until_serving
from test_causal import CAUSAL_LORA
from tiny_models import tiny_causal_source_config
from tiny_tokenizer import tiny_tokenizer

from casan_hf import casan_class


# The end of sequence and start of the chat tokenizer ([SEP], [CLS]), so that generation stops where a turn ends.
CHAT_TOKENS = dict(bos_token_id=2, eos_token_id=3)
# A converted checkpoint's gates start scaled by exactly 0 (it scores as its source); at this scale every context
# parameter takes part, as after training.
TRAINED_CONTEXT_SCALE = 0.5
# Packed and padded batches sum the same tokens' losses in other orders and shapes: float32 rounding apart.
PACKED_LOSS_TOLERANCE = dict(rtol=1e-6, atol=1e-6)


def chat_checkpoint(family, folder):
    """A random transformers `family` causal LM converted to a deep_global CASAN checkpoint, its context opened to
    TRAINED_CONTEXT_SCALE, saved in `folder` with the chat tokenizer: what a user fine-tunes, evaluates or serves."""
    torch.manual_seed(0)
    source_class = transformers.AutoModelForCausalLM._model_mapping[type(tiny_causal_source_config(family))]
    source = source_class(tiny_causal_source_config(family, **CHAT_TOKENS))
    source.save_pretrained(folder / "source")
    model = casan_class(family, "causal-lm").from_pretrained(folder / "source", context_type="deep_global")
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("context_scale"):
                parameter.fill_(TRAINED_CONTEXT_SCALE)
    model.save_pretrained(folder)
    tiny_tokenizer(folder, token_types=False, chat=True)
    return folder


def context_parameter_names(model):
    return {name for name, _ in model.named_parameters() if ".context_mixer." in name}


CHATS = [
    [{"role": "user", "content": "the film was funny"}, {"role": "assistant", "content": "i liked it " * turns}]
    for turns in range(1, 7)
]
PREFERENCES = [
    {
        "prompt": [{"role": "user", "content": "the film was"}],
        "chosen": [{"role": "assistant", "content": "funny and gripping"}],
        "rejected": [{"role": "assistant", "content": "dull , not funny at all"}],
    },
    {
        "prompt": [{"role": "user", "content": "i liked it"}],
        "chosen": [{"role": "assistant", "content": "the film was gripping !"}],
        "rejected": [{"role": "assistant", "content": "it was dull ."}],
    },
]


def trl():
    return pytest.importorskip("trl", reason="TRL (`trl`) is not installed")


class GradientRecorder(transformers.TrainerCallback):
    """The names of the parameters whose gradient is non-zero at some optimizer step."""

    def __init__(self):
        self.with_gradients = set()

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        for name, parameter in model.named_parameters():
            if parameter.grad is not None and parameter.grad.abs().sum() > 0:
                self.with_gradients.add(name)


def trainer_arguments(config_class, folder, **settings):
    """Two CPU steps of `config_class` (SFTConfig, DPOConfig, GRPOConfig), logging each, saving nothing on the way; in
    float32, not TRL's default bf16 autocast, which accelerate leaves wrapped around the trained model's forward (its
    logits would then be bf16's, not the saved weights')."""
    return config_class(output_dir=str(folder), max_steps=2, learning_rate=1e-3, use_cpu=True, bf16=False,
                        report_to=[], save_strategy="no", logging_steps=1, seed=0, **settings)  # fmt: skip


RELOAD_TRAINED = """
import sys, torch, transformers
folder = sys.argv[1]
try:
    from peft import AutoPeftModelForCausalLM
    model = AutoPeftModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
except ValueError:  # no adapter_config.json: a whole model
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
tokenizer = transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
ids = tokenizer.apply_chat_template([{"role": "user", "content": "the film was"}], add_generation_prompt=True,
                                    return_tensors="pt", return_dict=True)["input_ids"]
with torch.no_grad():
    torch.save({"ids": ids, "logits": model.eval()(input_ids=ids).logits}, "reloaded.pt")
print(type(model).__name__, type(model).__module__.split(".")[0])
"""


def assert_reloads_without_casan_hf(model, folder, tmp_path):
    """`folder`, as a trainer saved it (a whole model or a LoRA adapter with the context mixers), loads where
    casan_hf cannot be imported, with the trained model's logits on a chat prompt; returns the loaded class's name and
    top-level module."""
    output = run_without_casan_hf(RELOAD_TRAINED, tmp_path, args=[folder])
    reloaded = torch.load(tmp_path / "reloaded.pt")
    with torch.no_grad():
        expected = model.eval()(input_ids=reloaded["ids"].to(model.device)).logits
    torch.testing.assert_close(reloaded["logits"], expected, rtol=1e-5, atol=1e-5)
    return output.strip().splitlines()[-1].split()


@pytest.mark.parametrize(
    "family, lora, batching",
    [("llama", False, "packing"), ("llama", True, "padding_free"), ("qwen3", False, "padding_free"),
     ("qwen3", True, "packing")],
)  # fmt: skip
def test_sft_trains_and_what_it_saves_reloads_without_casan_hf(family, lora, batching, tmp_path):
    """SFTTrainer on a conversational set, in full or with LoRA (the context mixers trained in full beside the
    adapters), packed (best-fit, padding-free rows) or padding-free: every context parameter gets gradients, and the
    saved model or adapter reloads in a fresh process with the trained logits."""
    trl_module = trl()
    from datasets import Dataset
    from peft import LoraConfig

    folder = chat_checkpoint(family, tmp_path / "casan")
    # Packing fills rows of max_length; padding-free without packing cuts nothing (TRL refuses a max_length there).
    max_length = 32 if batching == "packing" else None
    arguments = trainer_arguments(trl_module.SFTConfig, tmp_path / "run", per_device_train_batch_size=3,
                                  max_length=max_length, **{batching: True})  # fmt: skip
    recorder = GradientRecorder()
    trainer = trl_module.SFTTrainer(
        model=str(folder),
        args=arguments,
        train_dataset=Dataset.from_list([{"messages": chat} for chat in CHATS]),
        peft_config=LoraConfig(**CAUSAL_LORA) if lora else None,
        callbacks=[recorder],
    )
    batch = next(iter(trainer.get_train_dataloader()))
    assert "attention_mask" not in batch and batch["position_ids"].shape[0] == 1  # one row, sequences restart in it
    trainer.train()
    assert all(torch.isfinite(torch.tensor(entry["loss"])) for entry in trainer.state.log_history if "loss" in entry)
    context = {name for name in recorder.with_gradients if ".context_mixer." in name}
    assert context and context == context_parameter_names(trainer.model) & {
        name for name, parameter in trainer.model.named_parameters() if parameter.requires_grad
    }
    trainer.save_model(tmp_path / "saved")
    loaded = assert_reloads_without_casan_hf(trainer.model, tmp_path / "saved", tmp_path)
    assert loaded == (
        ["PeftModelForCausalLM", "peft"] if lora else [type(trainer.model).__name__, "transformers_modules"]
    )


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_a_packed_batch_has_the_loss_of_the_same_sequences_padded(family, tmp_path):
    """TRL's collator, padding-free (one row, position ids restarting, no mask) and padded: the same chats give the
    same loss, within PACKED_LOSS_TOLERANCE; each sequence's context restarts where it starts. Without a cache, as
    trainers call the model: transformers reads packed sequences from the position ids only where there is none."""
    trl_module = trl()
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    folder = chat_checkpoint(family, tmp_path)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    assert trl_module.__version__ and type(model).__module__ == "casan_hf.modeling_casan_causal"
    examples = [{"input_ids": tokenizer.apply_chat_template(chat, tokenize=True)["input_ids"]} for chat in CHATS]
    losses = {}
    for padding_free in (False, True):
        batch = DataCollatorForLanguageModeling(pad_token_id=tokenizer.pad_token_id, padding_free=padding_free)(
            examples
        )
        with torch.no_grad():
            losses[padding_free] = model(**batch, use_cache=False).loss
    torch.testing.assert_close(losses[True], losses[False], **PACKED_LOSS_TOLERANCE)


def test_dpo_keeps_the_reference_frozen_and_trains_the_context(tmp_path):
    """DPOTrainer on a tiny preference set: the reference model (TRL's copy of the start) gets no gradient and stays
    as it was, every context parameter of the policy gets gradients; the saved policy reloads without casan_hf."""
    trl_module = trl()
    from datasets import Dataset

    folder = chat_checkpoint("llama", tmp_path / "casan")
    recorder = GradientRecorder()
    trainer = trl_module.DPOTrainer(
        model=str(folder),
        args=trainer_arguments(trl_module.DPOConfig, tmp_path / "run", per_device_train_batch_size=2),
        train_dataset=Dataset.from_list(PREFERENCES),
        callbacks=[recorder],
    )
    reference = trainer.ref_model
    start = {name: tensor.clone() for name, tensor in reference.state_dict().items()}
    trainer.train()
    assert all(parameter.grad is None for parameter in reference.parameters())
    for name, tensor in reference.state_dict().items():
        assert torch.equal(tensor, start[name]), name
    assert context_parameter_names(trainer.model) <= recorder.with_gradients
    trainer.save_model(tmp_path / "saved")
    assert assert_reloads_without_casan_hf(trainer.model, tmp_path / "saved", tmp_path)[1] == "transformers_modules"


def film_reward(completions, **kwargs):
    """A rule-based reward: how often the completion says "film"."""
    return [float(completion[-1]["content"].split().count("film")) for completion in completions]


def test_grpo_generates_with_the_model_and_trains(tmp_path):
    """GRPOTrainer, two steps with a rule-based reward, generating with the model's own generate() (no vLLM): the
    completions are sampled, the rewards logged, the context trained; the saved model reloads without casan_hf."""
    trl_module = trl()
    from datasets import Dataset

    folder = chat_checkpoint("qwen3", tmp_path / "casan")
    prompts = [[{"role": "user", "content": text}] for text in ("the film was", "i liked it", "a dull film", "it was")]
    arguments = trainer_arguments(trl_module.GRPOConfig, tmp_path / "run", per_device_train_batch_size=4,
                                  num_generations=2, max_completion_length=6, use_vllm=False)  # fmt: skip
    recorder = GradientRecorder()
    trainer = trl_module.GRPOTrainer(
        model=str(folder),
        reward_funcs=film_reward,
        args=arguments,
        train_dataset=Dataset.from_list([{"prompt": prompt} for prompt in prompts]),
        callbacks=[recorder],
    )
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert len(logged) == 2 and all(entry["completions/mean_length"] > 0 for entry in logged)
    assert context_parameter_names(trainer.model) & recorder.with_gradients
    trainer.save_model(tmp_path / "saved")
    assert assert_reloads_without_casan_hf(trainer.model, tmp_path / "saved", tmp_path)[1] == "transformers_modules"


# lm-evaluation-harness's local tasks: a multiple-choice log-likelihood task and a generate_until task, each a YAML
# over a JSON-lines file of its own (its `{data}` path), read by `datasets`' json builder offline.
CHOICE_TASK = """
task: casan_tiny_choice
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{label}}}}"
metric_list:
  - metric: acc
"""
GENERATE_TASK = """
task: casan_tiny_generate
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["[SEP]"]
  max_gen_toks: 5
  do_sample: false
metric_list:
  - metric: exact_match
"""
CHOICE_DOCS = [
    {"question": "the film was", "choices": ["funny", "dull", "gripping and funny"], "label": 0},
    {"question": "i liked it", "choices": ["not at all", "a lot !"], "label": 0},
    {"question": "a dull film , i", "choices": ["liked it", "was not funny", "?"], "label": 1},
    {"question": "it was", "choices": ["the film", "gripping"], "label": 1},
]
GENERATE_DOCS = [{"prompt": "the film was", "answer": "funny"}, {"prompt": "i liked", "answer": "it"}]


def local_tasks(folder):
    """The two tasks' YAML and data files in `folder`, for `--include_path`."""
    folder.mkdir()
    for name, task, docs in (("choice", CHOICE_TASK, CHOICE_DOCS), ("generate", GENERATE_TASK, GENERATE_DOCS)):
        data = folder / f"{name}.jsonl"
        data.write_text("".join(json.dumps(doc) + "\n" for doc in docs))
        (folder / f"{name}.yaml").write_text(task.format(data=data))
    return folder


# lm-evaluation-harness batches requests (right-padded for log-likelihoods, left-padded for generation) where the
# direct computation scores one text at a time: float32 rounding apart, on sums of a few log-probabilities.
LOG_LIKELIHOOD_TOLERANCE = dict(rtol=0, atol=1e-5)


def log_likelihood(model, tokenizer, context, continuation):
    """The sum of the continuation's token log-probabilities after the context, from one forward of the whole text,
    split where the context's tokens end (as lm-evaluation-harness splits them)."""
    whole = tokenizer(context + continuation)["input_ids"]
    context_length = len(tokenizer(context)["input_ids"])
    with torch.no_grad():
        log_probs = model(input_ids=torch.tensor([whole])).logits[0].log_softmax(-1)
    return sum(log_probs[position - 1, whole[position]].item() for position in range(context_length, len(whole)))


def greedy_continuation(model, tokenizer, prompt, max_new_tokens):
    """The model's greedy continuation of `prompt` as text (generate() stops at the end of sequence), its special
    tokens left out, as lm-evaluation-harness decodes it."""
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    tokens = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(tokens[0, ids.shape[1] :], skip_special_tokens=True)


def logged_samples(output_path, task):
    """The per-example records `lm_eval --log_samples` wrote for `task`."""
    (samples,) = output_path.rglob(f"samples_{task}_*.jsonl")
    return [json.loads(line) for line in samples.read_text().splitlines()]


@pytest.mark.parametrize("context", ["deep_global", "none"])
def test_lm_eval_log_likelihoods_and_generations_are_the_model_s_own(context, tmp_path):
    """`lm_eval --model hf --model_args pretrained=FOLDER,trust_remote_code=True` on local tasks, offline: every logged
    log-likelihood equals the model's own scoring of the same context and continuation, and every generation its
    greedy generate(); with `context_type="none"`, both are those of transformers' LlamaForCausalLM with the same
    weights."""
    pytest.importorskip("lm_eval", reason="lm-evaluation-harness (`lm_eval`) is not installed")
    folder = chat_checkpoint("llama", tmp_path / "casan")
    if context == "none":
        casan_class("llama", "causal-lm").from_pretrained(folder / "source", context_type="none").save_pretrained(
            folder
        )
        reference = transformers.LlamaForCausalLM.from_pretrained(folder / "source").eval()
    else:
        reference = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    command = ["lm_eval", "--model", "hf", "--model_args", f"pretrained={folder},trust_remote_code=True",
               "--tasks", "casan_tiny_choice,casan_tiny_generate", "--include_path", local_tasks(tmp_path / "tasks"),
               "--batch_size", "4", "--device", "cpu", "--output_path", tmp_path / "results",
               "--log_samples"]  # fmt: skip
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    subprocess.run(
        [str(Path(sys.executable).parent / command[0]), *map(str, command[1:])],
        cwd=tmp_path,
        env={**os.environ, **offline, "HF_MODULES_CACHE": str(tmp_path / "hf_modules")},
        check=True,
        capture_output=True,
    )
    scored = 0
    for sample in logged_samples(tmp_path / "results", "casan_tiny_choice"):
        for arguments, response in zip(sample["arguments"].values(), sample["resps"], strict=True):
            logged = float(response[0][0])
            expected = log_likelihood(reference, tokenizer, arguments["arg_0"], arguments["arg_1"])
            torch.testing.assert_close(logged, expected, **LOG_LIKELIHOOD_TOLERANCE)
            scored += 1
    assert scored == sum(len(doc["choices"]) for doc in CHOICE_DOCS)
    generations = logged_samples(tmp_path / "results", "casan_tiny_generate")
    assert len(generations) == len(GENERATE_DOCS)
    for sample in generations:
        assert sample["resps"][0][0] == greedy_continuation(reference, tokenizer, sample["doc"]["prompt"], 5)


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory):
    """`python -m casan_hf.cli.serve FOLDER` on 127.0.0.1, the converted Llama chat checkpoint preloaded, until the
    module's tests are done; yields (base URL, folder)."""
    for module in ("fastapi", "uvicorn"):
        pytest.importorskip(module, reason=f"transformers' server needs `{module}` (transformers[serving])")
    folder = chat_checkpoint("llama", tmp_path_factory.mktemp("served"))
    port = free_port()
    command = [sys.executable, "-m", "casan_hf.cli.serve", str(folder), "--host", "127.0.0.1", "--port", str(port),
               "--device", "cpu", "--log-level", "error"]  # fmt: skip
    repository = str(Path(__file__).resolve().parents[1])
    server = subprocess.Popen(
        command, cwd=folder, env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": repository},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def healthy():
        with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
            return json.load(response)["status"] == "ok"

    try:
        wait_until_serving(server, healthy, SERVER_START_SECONDS, server.stdout.read)
        yield url, folder
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


# How long the server may take to import transformers' serving stack and load the checkpoint on a loaded machine.
SERVER_START_SECONDS = 180
MAX_TOKENS = 6


def chat_completion(url, folder, prompt, stream):
    """The assistant's answer to one user message from /v1/chat/completions, greedy; streamed, the concatenation of
    the server-sent events' deltas up to the one that gives the finish reason."""
    body = {"model": str(folder), "messages": [{"role": "user", "content": prompt}], "max_tokens": MAX_TOKENS,
            "temperature": 0, "stream": stream}  # fmt: skip
    request = urllib.request.Request(
        f"{url}/v1/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        if not stream:
            return json.load(response)["choices"][0]["message"]["content"]
        events = [line[len("data: ") :] for line in response.read().decode().splitlines() if line.startswith("data: ")]
    chunks = [json.loads(event)["choices"][0] for event in events if event != "[DONE]"]
    assert chunks[-1]["finish_reason"] in ("stop", "length")
    deltas = [chunk["delta"] for chunk in chunks]
    return "".join(delta.get("content") or "" for delta in deltas)


def greedy_chat_answer(model, tokenizer, prompt):
    """The model's own greedy answer to the same chat, as the server decodes it (special tokens left out)."""
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )["input_ids"]
    tokens = model.generate(ids, max_new_tokens=MAX_TOKENS, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(tokens[0, ids.shape[1] :], skip_special_tokens=True)


PROMPTS = ["the film was", "i liked it", "a dull film", "was it funny ?"]


def expected_answers(folder):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    return {prompt: greedy_chat_answer(model, tokenizer, prompt) for prompt in PROMPTS}


def test_the_server_answers_chats_streamed_and_not_as_generate_does(chat_server):
    """One request at a time over HTTP: each answer, streamed or not, is the model's greedy generate()."""
    url, folder = chat_server
    expected = expected_answers(folder)
    for prompt in PROMPTS:
        for stream in (False, True):
            assert chat_completion(url, folder, prompt, stream) == expected[prompt], (prompt, stream)


def test_concurrent_requests_each_get_their_own_greedy_answer(chat_server):
    """Eight requests at once (four prompts, each streamed and not): each answer is its own prompt's greedy
    generate(), as if it had been alone."""
    url, folder = chat_server
    expected = expected_answers(folder)
    requests = [(prompt, stream) for prompt in PROMPTS for stream in (False, True)]
    with ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(lambda request: chat_completion(url, folder, *request), requests))
    assert answers == [expected[prompt] for prompt, _ in requests]
