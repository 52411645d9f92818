"""The fused kernels' dispatch and switch, and their checks run through Triton's interpreter.

The kernels themselves are checked in tests/fused_mixer_cases.py, which needs them to run: on the CPU only under
Triton's interpreter, which must be switched on before the kernels are defined, so in a pytest process of its own
(started here). Everything else in the suite runs the PyTorch path, as every CPU does."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest
import torch
from fresh_process import run_without_casan_hf
from tiny_models import padded_batch, tiny_config

from casan_hf import CasanModel, context_mixer, fused_mixer
from casan_hf.benchmark import fused_host_work
from casan_hf.context_mixer import FUSED_MIXER_MODES, FUSED_MIXER_VARIABLE, CasanContextMixer, set_fused_mixer
from casan_hf.fused_mixer import fused_mix_available


TESTS = os.path.dirname(os.path.abspath(__file__))


def test_kernels_match_the_formulas_through_the_interpreter():
    """tests/fused_mixer_cases.py with TRITON_INTERPRET=1: every form, dtype and edge case, and the families' models,
    fused against the formulas and the PyTorch path; all but the compiled GPU case, which only a GPU runs."""
    pytest.importorskip("triton", reason="triton is in the test extra: `make install` installs it")
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            *(os.path.join(TESTS, "fused_mixer_cases.py"), "-k", "not on_a_gpu"),
        ],
        env={**os.environ, "TRITON_INTERPRET": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0 and " passed" in summary and "skipped" not in summary, (
        f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    )


def test_the_cpu_runs_the_pytorch_path(monkeypatch):
    """Without Triton's interpreter a CPU tensor never goes to the kernels, whatever the mode says."""
    monkeypatch.setattr(
        context_mixer, "fused_mix_apply", lambda *args: pytest.fail("the fused kernels ran on the CPU")
    )
    assert not fused_mix_available(torch.zeros(1))
    model = CasanModel(tiny_config(context_type="deep_global"))
    set_fused_mixer(model, "compiled")
    input_ids, attention_mask = padded_batch([5, 3])
    model(input_ids, attention_mask=attention_mask).last_hidden_state.sum().backward()


def test_float64_stays_on_the_pytorch_path():
    """The kernels compute in fp32: float64 states, which ask for float64 arithmetic, never reach them."""
    assert not fused_mix_available(torch.zeros(1, dtype=torch.float64))


def mixer_modes(model):
    return {module.fused for module in model.modules() if isinstance(module, CasanContextMixer)}


def test_mixers_run_fused_in_eager_mode_unless_told_otherwise(monkeypatch):
    model = CasanModel(tiny_config(context_type="global"))
    assert mixer_modes(model) == {"eager"}
    assert set_fused_mixer(model, "off") == model.config.num_hidden_layers
    assert mixer_modes(model) == {"off"}
    for mode in FUSED_MIXER_MODES:
        monkeypatch.setenv(FUSED_MIXER_VARIABLE, mode)
        assert mixer_modes(CasanModel(tiny_config())) == {mode}


@pytest.mark.parametrize("value", ["0", "on", ""])
def test_a_bad_mode_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv(FUSED_MIXER_VARIABLE, value)
    with pytest.raises(ValueError, match=rf"CASAN_FUSED_MIXER={value!r}: use one of 'eager', 'compiled', 'off'"):
        CasanModel(tiny_config())
    monkeypatch.delenv(FUSED_MIXER_VARIABLE)
    with pytest.raises(ValueError, match=rf"set_fused_mixer: mode={value!r}: use one of 'eager', 'compiled', 'off'"):
        set_fused_mixer(CasanModel(tiny_config()), value)


def test_a_saved_folder_loads_and_runs_where_triton_is_missing(tmp_path):
    """The kernels' file is one of a folder's code files, its `import triton` guarded: transformers' check of a
    remote-code folder's imports does not ask for Triton, and the model loads and runs where it cannot be imported."""
    folder = tmp_path / "casan"
    CasanModel(tiny_config(context_type="global")).save_pretrained(folder)
    assert (folder / "fused_mixer.py").is_file()
    run_without_casan_hf(
        f"""
        import sys

        class BlockTriton:
            def find_spec(self, name, path=None, target=None):
                if name == "triton" or name.startswith("triton."):
                    raise ImportError("triton is not installed in this process")

        sys.meta_path.insert(0, BlockTriton())
        import torch
        from transformers import AutoModel
        from transformers.dynamic_module_utils import get_imports

        for code in {sorted(str(path) for path in folder.glob("*.py"))!r}:
            assert not any(name.startswith("triton") for name in get_imports(code)), code
        model = AutoModel.from_pretrained({str(folder)!r}, trust_remote_code=True)
        assert "triton" not in sys.modules
        hidden = model(torch.tensor([[5, 6, 7]])).last_hidden_state
        assert torch.isfinite(hidden).all()
        print("ran without triton")
        """,
        tmp_path,
    )


@pytest.mark.parametrize("context_type", fused_host_work.CONTEXT_TYPES)
def test_the_fused_call_does_no_more_host_work_than_the_pytorch_path(context_type):
    """Launches stubbed (casan_hf/benchmark/fused_host_work.py): the fused mixer's forward makes no more Python calls
    and aten operators than its PyTorch path, its backward fewer operators and five Python calls of its own (the
    autograd node's `apply` and `_get_user_fn`, `FusedMix.backward`, `_backward`, `mix_backward_kernels`), where the
    PyTorch path's backward runs C++ alone."""
    fused = fused_host_work.count_host_work(context_type, "fused")
    pytorch = fused_host_work.count_host_work(context_type, "pytorch")
    assert fused["python forward"] <= pytorch["python forward"], (fused, pytorch)
    assert fused["aten forward"] < pytorch["aten forward"], (fused, pytorch)
    assert fused["aten backward"] < pytorch["aten backward"], (fused, pytorch)
    assert fused["python backward"] <= pytorch["python backward"] + 5, (fused, pytorch)


def test_the_sentences_lie_on_the_grid_axis_without_a_cap():
    """The kernels' grid is (sentences x blocks of tokens, targets): CUDA caps the grid's second and third axes at
    65535, its first at 2^31 - 1."""
    mixer, query, key, context = fused_host_work.mixer_and_inputs("global")
    grids = []

    class RecordGrid:
        def __getitem__(self, grid):
            grids.append(grid)
            return lambda *args, **kwargs: None

    with fused_host_work.stubbed_launches():
        fused_mixer._mix_forward_kernel = fused_mixer._mix_backward_kernel = RecordGrid()
        query_mixed, key_mixed, _ = mixer(query, key, context, return_gates=False)
        (query_mixed.sum() + key_mixed.sum()).backward()
    batch, n = query.shape[:2]
    rows = (fused_mixer.FORWARD_ROWS, fused_mixer.BACKWARD_ROWS)
    assert grids == [(batch * -(-n // rows_per_program), 2) for rows_per_program in rows]


def test_the_operator_registers_once_for_every_copy_of_the_same_code(tmp_path):
    """transformers loads each saved folder's code as a module of its own: a second module of the same file finds
    the operator by name (the file's hash), a changed file registers one of its own."""
    source = pathlib.Path(fused_mixer.__file__).read_text()
    modules = []
    for name, text in (("first", source), ("second", source), ("changed", source + "\n# changed\n")):
        path = tmp_path / name / "fused_mixer.py"
        path.parent.mkdir()
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(f"casan_copy_{name}.fused_mixer", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules.append(module)
    first, second, changed = (module.FUSED_MIX_OPERATOR for module in modules)
    assert first is fused_mixer.FUSED_MIX_OPERATOR and second is first
    assert changed.name() != first.name() and changed.name().startswith("casan::fused_mix_")


OPERATOR_FORMS = [
    dict(targets=targets, heads=heads, per_token=per_token, dynamic=dynamic)
    for targets, heads, per_token, dynamic in ((2, 1, False, True), (2, 4, True, True), (1, 1, True, False))
]


@pytest.mark.parametrize("form", OPERATOR_FORMS, ids=lambda form: "-".join(f"{k}={v}" for k, v in form.items()))
def test_the_operators_cpu_kernel_is_the_pytorch_path(form):
    """On the CPU the operator runs `mix_with_operators`, and its backward the kernels' formulas: the outputs and
    every gradient (of a loss on the mixed states and the gates) equal autograd's on the PyTorch path."""
    torch.manual_seed(0)
    targets, heads, d = form["targets"], form["heads"], 16
    projected = torch.randn(targets, 2, 5 if form["per_token"] else 1, d, requires_grad=True)
    states = [torch.randn(2, 5, d, requires_grad=True) for _ in range(targets)]
    width = d // heads
    parameters = [torch.randn(targets, width), torch.randn(targets, width), torch.randn(targets)]
    parameters = [p.requires_grad_() for p in parameters] if form["dynamic"] else [None, None, None]
    leaves = [tensor for tensor in (projected, *states, *parameters) if tensor is not None]
    second = states[1] if targets > 1 else None
    mixed, gates = fused_mixer.FUSED_MIX_OPERATOR(projected, states[0], second, *parameters, 0.3, heads, True)
    expected_mixed, expected_gate = fused_mixer.mix_with_operators(
        projected, states, *parameters, 0.3, heads, form["per_token"]
    )
    assert torch.equal(mixed, expected_mixed)
    outputs, expected_outputs = [mixed], [expected_mixed]
    if form["dynamic"]:
        assert torch.equal(gates, expected_gate)
        outputs.append(gates)
        expected_outputs.append(expected_gate)
    weights = [torch.randn_like(output) for output in outputs]
    grads = torch.autograd.grad(outputs, leaves, weights)
    expected = torch.autograd.grad(expected_outputs, leaves, weights)
    for index, (actual, reference) in enumerate(zip(grads, expected, strict=True)):
        torch.testing.assert_close(actual, reference, msg=f"gradient {index}")


# A model of BERT-base's depth at the smallest width, and the padded batches it is compiled over (a second length
# makes dynamo's shapes dynamic: no later shape compiles again).
COMPILED_MODEL = dict(num_hidden_layers=12, hidden_size=8, num_attention_heads=2, intermediate_size=8)
COMPILED_BATCHES = ([5, 3], [6, 2], [7, 4])


class GraphCounter:
    """A torch.compile backend that keeps each graph dynamo hands it and runs it as traced (no inductor: the subject
    is what dynamo traces)."""

    def __init__(self):
        self.graphs = []

    def __call__(self, graph_module, example_inputs):
        self.graphs.append(graph_module)
        return graph_module.forward


def training_steps(model, forward, batches):
    """The last hidden states and every parameter's gradient of one step on each batch."""
    results = []
    for lengths in batches:
        model.zero_grad(set_to_none=True)
        input_ids, attention_mask = padded_batch(lengths)
        hidden = forward(input_ids, attention_mask=attention_mask).last_hidden_state
        hidden.square().mean().backward()
        grads = {name: parameter.grad for name, parameter in model.named_parameters() if parameter.grad is not None}
        results.append((hidden.detach(), grads))
    return results


@pytest.mark.parametrize("context_type", ["global", "deep", "deep_global"])
def test_a_compiled_model_holds_the_fused_operator_whole(context_type):
    """In the mode "compiled", dynamo traces a 12-layer model with the fused operator in every layer that mixes
    (on the CPU its kernel is the PyTorch path) without a graph break, in no more graphs than shapes, and its
    training steps equal eager's (the PyTorch path): outputs and every gradient."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = CasanModel(tiny_config(context_type=context_type, gate_per_head=True, **COMPILED_MODEL))
    mixing_layers = set_fused_mixer(model, "compiled")
    counter = GraphCounter()
    torch._dynamo.utils.counters.clear()
    compiled = training_steps(model, torch.compile(model, backend=counter), COMPILED_BATCHES)
    assert not torch._dynamo.utils.counters["graph_break"], dict(torch._dynamo.utils.counters["graph_break"])
    assert len(counter.graphs) <= len(COMPILED_BATCHES)
    for graph in counter.graphs:
        operators = [node for node in graph.graph.nodes if node.target is fused_mixer.FUSED_MIX_OPERATOR]
        assert len(operators) == mixing_layers
    eager = training_steps(model, model, COMPILED_BATCHES)
    for (hidden, grads), (expected_hidden, expected_grads) in zip(compiled, eager, strict=True):
        torch.testing.assert_close(hidden, expected_hidden)
        assert grads.keys() == expected_grads.keys()
        for name, grad in grads.items():
            torch.testing.assert_close(grad, expected_grads[name], msg=name)
    torch._dynamo.reset()


def frames_with_a_graph_break_in_the_mixer(num_hidden_layers, monkeypatch):
    """How many frames dynamo compiles for one forward of a global model of `num_hidden_layers` with a graph break
    forced inside every mixer's fused call, and whether it ran out of recompiles."""
    torch._dynamo.reset()
    fused_mix = CasanContextMixer.fused_mix

    def breaking(self, *args):
        torch._dynamo.graph_break()
        return fused_mix(self, *args)

    monkeypatch.setattr(CasanContextMixer, "fused_mix", breaking)
    model = CasanModel(
        tiny_config(context_type="global", **{**COMPILED_MODEL, "num_hidden_layers": num_hidden_layers})
    )
    set_fused_mixer(model, "compiled")
    torch._dynamo.utils.counters.clear()
    input_ids, attention_mask = padded_batch(COMPILED_BATCHES[0])
    with torch.no_grad():
        torch.compile(model, backend=GraphCounter())(input_ids, attention_mask=attention_mask)
    counters = torch._dynamo.utils.counters
    assert counters["graph_break"], "no graph break was forced"
    frames = counters["frames"]["total"]
    torch._dynamo.reset()
    return frames


def test_a_graph_break_in_the_mixer_does_not_compile_each_layer_again(monkeypatch):
    """A graph break inside the mixer splits the model into frames, but none of them guards the layer (its index
    once did, `ContextPlan.context_source`): 3 layers and 12 compile the same frames. (The first compile of a process
    counts one frame fewer, whatever the depth: a warm-up goes first.)"""
    frames = [frames_with_a_graph_break_in_the_mixer(layers, monkeypatch) for layers in (3, 3, 12)]
    assert frames[1] == frames[2], frames
