"""The benchmark's `--quick` run completes and writes the records the issue asks for, and `--family` runs another
family's models (no timing asserts)."""

import contextlib
import io
import json
import sys

import pytest


REQUIRED = {
    "commit": str,
    "cpu": str,
    "cpus": int,
    "cpu_capability": str,
    "family": str,
    "size": str,
    "context_type": (str, type(None)),
    "seq_len": int,
    "batch_size": int,
    "mode": str,
    "device": str,
    "dtype": str,
    "tokens_per_s": float,
    "peak_mem_mb": (float, type(None)),
    "params": int,
    "ratio_vs_bert": float,
    "flop_floor": float,
}


@pytest.fixture(scope="module")
def quick_records(tmp_path_factory):
    """`--quick`'s records and what it printed, run in this process (`run_main`), as the script's own command line."""
    from conftest import load_script, run_main

    path = tmp_path_factory.mktemp("benchmark") / "quick.json"
    output = io.StringIO()  # the tables and the progress bar, standard output and error together
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        patch.setenv("HF_HUB_OFFLINE", "1")
        run_main(load_script("benchmark"), ["--quick", "--device", "cpu", "--json", path])
    return json.loads(path.read_text()), output.getvalue()


def test_quick_run_writes_one_record_per_model_and_mode(quick_records):
    records, _ = quick_records
    assert {record["mode"] for record in records} == {"inference", "training"}
    labels = [record["model"] for record in records if record["mode"] == "inference"]
    assert labels[0] == "bert" and "bert (control copy)" in labels and "casan none (control)" in labels
    assert {record["context_type"] for record in records} >= {None, "none", "global", "deep", "deep_global"}
    assert {record["context_rank"] for record in records if record["context_type"] in ("deep", "deep_global")} == {
        None,
        64,
    }


def test_records_have_the_required_fields(quick_records):
    records, _ = quick_records
    for record in records:
        for field, kind in REQUIRED.items():
            assert isinstance(record[field], kind), (field, record[field])
        assert record["size"] == "minilm" and record["device"] == "cpu" and record["dtype"] == "float32"
        assert record["family"] == "bert" and record["attn_implementation"] == "sdpa"
        assert record["tokens_per_s"] > 0 and record["params"] > 0
        assert 0 < record["flop_floor"] <= 1 and 0 < record["floor"] <= record["flop_floor"]


def test_bert_is_the_reference_and_casan_adds_only_context_parameters(quick_records):
    records, _ = quick_records
    for record in records:
        if record["context_type"] is None:
            assert record["flop_floor"] == 1.0 and record["context_params"] == 0
    bert = next(record for record in records if record["model"] == "bert")
    assert bert["ratio_vs_bert"] == 1.0
    for record in records:
        assert record["params"] == bert["params"] + record["context_params"]


def test_progress_and_tables_are_shown(quick_records):
    _, output = quick_records
    assert "flop floor" in output and "minilm" in output and "step" in output


def test_compile_times_each_model_beside_its_compiled_twin(tmp_path, monkeypatch, capsys):
    """`--compile MODE`: every model also compiled (here with the eager backend: the tracing, not the compiler,
    which would take minutes on a CPU), compiled BERT the reference of the compiled models, warm-up untimed."""
    from conftest import load_script, run_main

    path = tmp_path / "compiled.json"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run_main(load_script("benchmark"), ["--quick", "--device", "cpu", "--context-types", "global", "--rank", "0",
                                        "--repeats", "1", "--compile", "reduce-overhead", "--compile-backend", "eager",
                                        "--json", path])  # fmt: skip
    records = json.loads(path.read_text())
    inference = [record for record in records if record["mode"] == "inference"]
    assert [record["model"] for record in inference] == [
        "bert",
        "bert [compiled reduce-overhead]",
        "bert (control copy)",
        "bert (control copy) [compiled reduce-overhead]",
        "casan global",
        "casan global [compiled reduce-overhead]",
    ]
    for record in records:
        assert record["compile_mode"] == ("reduce-overhead" if "[compiled" in record["model"] else None)
        assert record["speedup_vs_eager"] > 0 and (record["compile_mode"] or record["speedup_vs_eager"] == 1.0)
        if record["model"].startswith("bert [compiled"):
            assert record["ratio_vs_bert"] == 1.0  # compiled BERT is the compiled models' reference
    assert "x eager" in "".join(capsys.readouterr())


def test_compile_refuses_a_warm_up_that_would_time_the_compiler(monkeypatch, capsys):
    from conftest import load_script

    monkeypatch.setattr(sys, "argv", ["benchmark.py", "--compile", "default", "--warmup", "1"])
    with pytest.raises(SystemExit):
        load_script("benchmark").parse_args()
    assert "--compile needs --warmup 3 or more" in capsys.readouterr().err


def test_every_compiled_model_keeps_its_own_graphs():
    """All models share transformers' wrapper code objects; with dynamo's default limit of 8 graphs per code
    object, the models compiled after the eighth graph ran eagerly, timed as compiled."""
    import torch

    from casan_hf.benchmark.runner import Variant, compiled_twins

    variants = [Variant(f"m{i}", "none", None, None) for i in range(8)]
    variants += [Variant(f"m{i} [compiled default]", "none", None, "default") for i in range(8)]
    limit = torch._dynamo.config.recompile_limit
    try:
        twins = compiled_twins({f"m{i}": torch.nn.Identity() for i in range(8)}, variants, backend="eager")
        assert len(twins) == 16 and torch._dynamo.config.recompile_limit >= 4 * 8
    finally:
        torch._dynamo.config.recompile_limit = limit


def recording_models(labels, calls):
    """`{label: model}` whose forward appends its label to `calls`: the order `benchmark_group` runs them in."""
    import torch

    class Recorder(torch.nn.Module):
        def __init__(self, label):
            super().__init__()
            self.label = label

        def forward(self, **inputs):
            calls.append(self.label)

    return {label: Recorder(label) for label in labels}


@pytest.mark.parametrize("count", [2, 3, 8])
def test_the_rounds_run_in_a_balanced_cycle_of_orders(count):
    """The timed rounds' orders (`benchmark_group` without a seed): over one cycle of `balanced_orders` each model
    stands at every place equally often and follows every other model equally often, so that Llama's control copy
    does not always run right after Llama; the cycle is `count` rounds long (twice that for an odd count)."""
    import collections

    import torch

    from casan_hf.benchmark.runner import Variant, balanced_orders, benchmark_group

    labels = [f"m{index}" for index in range(count)]
    cycle = balanced_orders(labels)
    assert len(cycle) == (count if count % 2 == 0 else 2 * count)
    places = collections.Counter((label, place) for order in cycle for place, label in enumerate(order))
    pairs = collections.Counter(pair for order in cycle for pair in zip(order, order[1:], strict=False))
    assert len(places) == count * count and len(set(places.values())) == 1
    assert len(pairs) == count * (count - 1) and len(set(pairs.values())) == 1

    calls = []

    models = recording_models(labels, calls)
    variants = [Variant(label) for label in labels]
    benchmark_group(models, variants, {}, "inference", torch.device("cpu"), 0, len(cycle))
    timed = calls[-len(cycle) * count :]
    assert [timed[index : index + count] for index in range(0, len(timed), count)] == cycle


def test_a_round_runs_each_model_its_block_of_steps_in_a_row():
    """`benchmark_group(..., block=3)`: in every round each model runs three steps one after the other, in the
    round's order, and each step is timed."""
    import torch

    from casan_hf.benchmark.runner import Variant, benchmark_group

    calls = []

    labels = ["a", "b", "c"]
    variants = [Variant(label) for label in labels]
    models = recording_models(labels, calls)
    results = benchmark_group(models, variants, {}, "inference", torch.device("cpu"), 0, 4, seed=1, block=3)
    timed = calls[-4 * 3 * len(labels) :]
    blocks = [timed[index : index + 3] for index in range(0, len(timed), 3)]
    assert all(len(set(block)) == 1 for block in blocks)
    rounds = [[block[0] for block in blocks[index : index + 3]] for index in range(0, len(blocks), 3)]
    assert all(sorted(order) == labels for order in rounds) and len({tuple(order) for order in rounds}) > 1
    assert all(len(results[label][0]) == len(results[label][1]) == 4 * 3 for label in labels)


def test_proxy_times_every_model_and_mode_beside_the_controls(tmp_path, monkeypatch, capsys):
    """`--proxy` at a toy size (2 layers, 3 rounds of 2 steps, one run; compiled with the eager backend: the
    tracing, not inductor): one record per model and mode, the controls among them, and the table of medians
    printed."""
    from conftest import load_script, run_main

    path = tmp_path / "proxy.json"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = ["--proxy", "--proxy-layers", "2", "--proxy-rounds", "3", "--proxy-block", "2", "--proxy-runs", "1",
           "--compile-backend", "eager", "--json", path]  # fmt: skip
    run_main(load_script("benchmark"), run)
    printed = capsys.readouterr().out
    records = json.loads(path.read_text())
    models = ["bert", "bert (control copy)", "casan none (control)", "casan global", "casan deep", "casan deep_global",
              "casan none, output gate", "casan global, output gate only"]  # fmt: skip
    modes = ["eager inference", "eager training", "compiled inference"]
    assert [(record["mode"], record["model"]) for record in records] == [(m, model) for m in modes for model in models]
    for record in records:
        assert record["layers"] == 2 and record["threads"] == 1 and len(record["step_us"]) == 3 * 2
        assert record["host_us"] > 0 and record["ratio_vs_bert"] > 0
        if record["model"] == "bert":
            assert record["ratio_vs_bert"] == 1.0 and record["extra_us_per_layer"] == 0.0
        if record["model"].startswith("bert"):
            assert record["forward_ops_per_layer"] == record["backward_ops_per_layer"] == 0.0
    assert records[3]["forward_ops_per_layer"] > 0  # global adds operators to every layer
    rows = [line for line in printed.splitlines() if line.startswith("| ")]
    assert len(rows) == 2 * (2 + len(models))  # the medians, then each run's ratios: a header, a rule, a row per model
    assert "| casan none (control) |" in printed and "| bert (control copy) |" in printed


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--proxy", "--proxy-runs", "0"], "--proxy-runs: must be a positive integer, got 0"),
        (["--proxy", "--proxy-hidden", "193"], "--proxy-hidden 193: not a multiple of its 3 heads"),
        (["--proxy", "--sizes", "minilm"], "does not take --sizes"),
        (["--proxy-rounds", "10"], "--proxy-rounds: only with --proxy"),
        (["--proxy", "--family", "modernbert"], "--proxy measures BERT only; it does not take --family modernbert"),
        (
            ["--family", "deberta-v2", "--attn", "sdpa"],
            "--attn sdpa: the deberta-v2 family has no sdpa attention in transformers; use --attn eager",
        ),
        (["--causal", "--sizes", "minilm"], "--causal has a setup of its own and does not take --sizes"),
        (["--proxy", "--causal-layers", "2"], "--causal-layers: only with --causal"),
        (["--causal", "--family", "roberta"], "--causal measures Llama only; it does not take --family roberta"),
        (["--causal", "--rank", "0"], "--causal times deep and deep_global at --rank: give a positive rank, not 0"),
        (["--causal", "--causal-kv-heads", "3"], "--causal-kv-heads 3: does not divide the 8 heads"),
        (["--causal", "--causal-hidden", "36", "--causal-heads", "4"], "not an even width per head of its 4 heads"),
    ],
)
def test_own_setups_refuse_bad_flags(argv, message, monkeypatch, capsys):
    from conftest import load_script

    monkeypatch.setattr(sys, "argv", ["benchmark.py", *argv])
    with pytest.raises(SystemExit):
        load_script("benchmark").parse_args()
    assert message in capsys.readouterr().err


def test_attention_defaults_to_what_the_family_has(monkeypatch):
    """No `--attn`: sdpa (the default output unchanged), and eager for DeBERTa-v2, which has no sdpa."""
    from conftest import load_script

    script = load_script("benchmark")
    for argv, family, attention in [([], "bert", "sdpa"), (["--family", "deberta-v2"], "deberta-v2", "eager")]:
        monkeypatch.setattr(sys, "argv", ["benchmark.py", *argv])
        args = script.parse_args()
        assert (args.family, args.attn) == (family, attention)


# A shape small enough for a test, given to the family's own config (its vocabulary and the rest stay its own).
TINY_SIZE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 37}
FAMILY_RUN = ["--sizes", "tiny", "--seq-lens", "8", "--batch-size", "1", "--modes", "training", "--context-types",
              "none", "global", "--rank", "0", "--warmup", "0", "--repeats", "1", "--device", "cpu"]  # fmt: skip


@pytest.mark.parametrize("family, attention", [("modernbert", "sdpa"), ("deberta-v2", "eager")])
def test_a_family_runs_against_its_own_transformers_model(family, attention, tmp_path, monkeypatch, capsys):
    """`--family`: the family's transformers base model (labelled by the family), its control copy and the family's
    CASAN base model with the same weights, at a size's shape (a tiny one here), in the attention the family has
    (no `--attn`: DeBERTa-v2 runs eager), through a training step with no pooler; no floor columns, and the table
    says why."""
    from conftest import load_script, run_main

    from casan_hf.benchmark import runner

    monkeypatch.setitem(runner.SIZES, "tiny", TINY_SIZE)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = tmp_path / "family.json"
    run_main(load_script("benchmark"), ["--family", family, *FAMILY_RUN, "--json", path])
    records = json.loads(path.read_text())
    labels = [family, f"{family} (control copy)", "casan none (control)", "casan global"]
    assert [record["model"] for record in records] == labels
    assert [record["context_type"] for record in records] == [None, None, "none", "global"]
    for record in records:
        assert record["family"] == family and record["size"] == "tiny" and record["mode"] == "training"
        assert record["attn_implementation"] == attention and record["weights"] == "random"
        assert record["flop_floor"] is None and record["floor"] is None and record["flops_per_byte"] is None
        assert record["tokens_per_s"] > 0 and record["params"] == records[0]["params"] + record["context_params"]
    assert records[0]["ratio_vs_bert"] == 1.0 and records[-1]["context_params"] > 0
    output = capsys.readouterr().out
    assert f"{family}, tiny (random weights), seq 8, batch 1, training" in output and "flop floor" not in output
    assert f"not {family}'s own arithmetic" in output


def test_gpu_busy_time_counts_overlapping_kernels_once():
    from casan_hf.benchmark.step_trace import union_length

    assert union_length([(0, 10), (5, 12), (20, 25), (21, 22)]) == 17
    assert union_length([]) == 0


def test_training_step_profile_dry_runs_on_the_cpu(tmp_path, capsys):
    """scripts/profile_training_step.py at a toy size on the CPU: the host side only, GPU busy time n/a, a
    chrome trace per model."""
    from conftest import load_script, run_main

    args = ["--device", "cpu", "--size", "small", "--seq-len", "8", "--batch-size", "1", "--dtype", "float32",
            "--warmup", "2", "--steps", "2", "--rows", "3", "--trace-dir", tmp_path]  # fmt: skip
    run_main(load_script("profile_training_step"), args)
    output = capsys.readouterr().out
    assert "## bert: unprofiled step" in output and "## casan global (mixer: pytorch): unprofiled step" in output
    steps = [line for line in output.splitlines() if line.startswith(("| 1 | ", "| 2 | "))]
    assert len(steps) == 4 and all(line.endswith("| n/a | n/a | n/a | n/a |") for line in steps)
    assert "| host operator (self CPU time) |" in output and "aten::" in output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bert.json.gz", "global.json.gz"]


def test_training_step_profile_compiles_each_model(capsys):
    """`--compile MODE` profiles each model through torch.compile (dynamo's eager backend here: inductor would
    compile for minutes on a CPU); the header names the mode and the backend."""
    from conftest import load_script, run_main

    args = ["--device", "cpu", "--size", "small", "--seq-len", "8", "--batch-size", "1", "--dtype", "float32",
            "--warmup", "3", "--steps", "1", "--rows", "2",
            "--compile", "default", "--compile-backend", "eager"]  # fmt: skip
    run_main(load_script("profile_training_step"), args)
    output = capsys.readouterr().out
    assert "compiled (default, eager)" in output.splitlines()[0]
    assert "## bert: unprofiled step" in output and "## casan global (mixer: pytorch): unprofiled step" in output


CAUSAL_RUN = ["--causal", "--causal-hidden", "32", "--causal-layers", "2", "--causal-heads", "4", "--causal-kv-heads",
              "2", "--causal-intermediate", "64", "--causal-vocab", "64", "--causal-context", "16",
              "--causal-new-tokens", "2", "--rank", "8", "--warmup", "0", "--repeats", "1",
              "--device", "cpu"]  # fmt: skip
CAUSAL_MODELS = ["llama", "llama (control copy)", "casan none (control)", "casan global", "casan deep_global",
                 "casan deep_global r8", "casan deep r8", "casan global r8"]  # fmt: skip


def test_causal_run_times_prefill_and_decode_beside_the_controls(tmp_path, monkeypatch, capsys):
    """`--causal` at a toy Llama (2 layers, a 16-token prompt, 2 new tokens): a record per model and phase, the
    controls among them, the targets beside global's rows, and the cache state per layer (keys and values; CASAN's
    running sums where a global kind keeps them)."""
    from conftest import load_script, run_main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = tmp_path / "causal.json"
    run_main(load_script("benchmark"), [*CAUSAL_RUN, "--json", path])
    records = json.loads(path.read_text())
    assert [(record["mode"], record["model"]) for record in records] == [
        (phase, model) for phase in ("prefill", "decode") for model in CAUSAL_MODELS
    ]
    key_values = 2 * 2 * (32 // 4) * 16 * 4  # keys and values, 2 kv heads of 8 features, 16 tokens, float32
    sums = (32 + 1) * 4  # the running sum of the layer inputs and the count, float32
    for record in records:
        assert record["family"] == "llama" and record["shape"]["layers"] == 2 and record["weights"] == "random"
        assert record["device"] == "cpu" and record["dtype"] == "float32" and record["attn_implementation"] == "sdpa"
        assert (record["seq_len"], record["batch_size"], record["repeats"]) == (16, 1, 1)
        assert record["new_tokens"] == (2 if record["mode"] == "decode" else 0)
        assert record["timed_calls"] == (2 if record["mode"] == "decode" else 1)  # decode: its tokens, one by one
        assert record["tokens_per_s"] > 0 and record["cpu_ms_per_step"] > 0 and record["ratio_vs_bert"] > 0
        assert record["params"] == records[0]["params"] + record["context_params"]
        assert record["kv_cache_bytes"] == [key_values] * 2
        global_kind = record["context_type"] in ("global", "deep_global")
        assert record["context_state_bytes"] == [sums if global_kind else 0] * 2
        assert (record["context_params"] > 0) == (record["context_type"] not in (None, "none"))
        if record["model"] == "llama":
            assert record["ratio_vs_bert"] == record["cpu_ratio_vs_bert"] == 1.0
        # operators counted: the controls run Llama's exactly, every context kind more
        assert record["operators"] == sum(record["operator_counts"].values()) > 0
        # and where the time goes: the profiler's CPU time of the same operators, the most first
        times = list(record["operator_cpu_us"].values())
        assert record["operator_cpu_us"].keys() == record["operator_counts"].keys() and min(times) >= 0
        assert times == sorted(times, reverse=True) and isinstance(record["context_cpu_us_per_layer"], float)
        adds_context = record["context_type"] not in (None, "none")
        assert (record["context_operators_per_layer"] > 0) == adds_context
        assert (record["flop_floor"] < 1 and record["floor"] < 1) == adds_context
        if record["mode"] == "prefill":
            assert record["floor"] == record["flop_floor"]
    targets = {(record["model"], record["mode"]): record["target"] for record in records if record["target"]}
    assert targets == {("casan global", "prefill"): 0.93, ("casan global", "decode"): 0.95}  # deep_global's: rank 64
    output = capsys.readouterr().out
    assert "prefill: 16-token prompt" in output and "decode: 2 tokens after a 16-token prompt" in output
    assert "cache state per sequence" in output and "casan none (control)" in output
    assert "compute operators of a step" in output


def test_a_rewound_cache_decodes_as_a_fresh_one():
    """Each timed decode step starts from the prompt's cache, rewound: the keys and values cut back and CASAN's
    running sums put back, so that decoding again gives the logits of the first decode."""
    import torch

    from casan_hf.benchmark.causal import CausalShape, causal_inputs, causal_models, prefill, prompt_state, rewind
    from casan_hf.benchmark.runner import Variant

    shape = CausalShape(hidden=32, layers=2, heads=4, kv_heads=2, intermediate=64, vocab=64, context=8, new_tokens=3)
    variants = [Variant("llama"), Variant("casan deep_global", "deep_global")]
    models = causal_models(shape, variants, "sdpa", torch.float32, torch.device("cpu"))
    inputs = causal_inputs(shape, torch.device("cpu"))
    for model in models.values():
        cache = prefill(model, inputs["prompt"])
        state = prompt_state(cache)
        decoded = []
        for _ in range(2):
            rewind(cache, state)
            with torch.no_grad():
                logits = [
                    model(input_ids=token.view(1, 1), past_key_values=cache).logits
                    for token in inputs["new_tokens"][0]
                ]
            decoded.append(torch.cat(logits, dim=1))
        assert cache.get_seq_length() == shape.context + shape.new_tokens
        torch.testing.assert_close(decoded[1], decoded[0], rtol=0, atol=0)
        assert len(state[1]) == (2 if hasattr(cache, "context_sums") else 0)
        rewind(cache, state)  # the prompt's own tensors, with generate()'s strides: not a crop's longer ones
        assert all(
            layer.keys is keys and layer.keys.is_contiguous()
            for layer, (keys, _) in zip(cache.layers, state[0], strict=True)
        )


def test_causal_compile_times_each_model_beside_its_compiled_twin(tmp_path, monkeypatch, capsys):
    """`--causal --compile`: each model followed by its compiled twin (dynamic shapes, here dynamo's graphs run by
    its eager backend), whose ratio is over compiled Llama's and `x eager` over its own eager run; each compiled
    model's prefill and first decoded token one graph each, no break, and nothing compiled again over the 64 tokens
    decoded after the second (which, with inductor, compiles for the cache's contiguous keys where the prefill left
    the attention's layout, in Llama too); Llama's control copy, the same modules, runs Llama's graphs and compiles
    none. Llama, its copy and one CASAN kind are compiled (`global` at a rank, the kinds' common projection path):
    every kind's compiled decoding is tests/test_causal.py's."""
    from conftest import load_script, run_main

    from casan_hf.benchmark import causal

    models = ["llama", "llama (control copy)", "casan global r8"]
    every_variant = causal.causal_variants
    monkeypatch.setattr(
        causal,
        "causal_variants",
        lambda rank, mode: [variant for variant in every_variant(rank, mode) if variant.eager_label in models],
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = tmp_path / "causal.json"
    run = [*CAUSAL_RUN, "--warmup", "3", "--compile", "default", "--compile-backend", "eager", "--json", path]
    run_main(load_script("benchmark"), run)
    records = json.loads(path.read_text())
    compiled_models = [model for name in models for model in (name, f"{name} [compiled default]")]
    assert [record["model"] for record in records if record["mode"] == "decode"] == compiled_models
    for record in records:
        if record["compile_mode"] is None:
            assert record["compiled_graphs"] is None and record["operators"] > 0
            continue
        made = 0 if record["model"].startswith("llama (control copy)") else 1
        graphs = {"prefill": made, "first token": made, "second token": 0, "next 64 tokens": 0, "graph breaks": 0}
        assert record["compiled_graphs"] == graphs, record["model"]
        assert record["operators"] is None and record["speedup_vs_eager"] > 0
        if record["model"] == "llama [compiled default]":
            assert record["ratio_vs_bert"] == record["cpu_ratio_vs_bert"] == 1.0
    output = capsys.readouterr().out
    assert "graphs each compiled model made" in output and "casan global r8 [compiled default]" in output
