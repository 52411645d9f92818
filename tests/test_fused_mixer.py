"""The fused kernels' dispatch and switch, and their checks run through Triton's interpreter.

The kernels themselves are checked in tests/fused_mixer_cases.py, which needs them to run: on the CPU only under
Triton's interpreter, which must be switched on before the kernels are defined, so in a pytest process of its own
(started here). Everything else in the suite runs the PyTorch path, as every CPU does."""

import os
import subprocess
import sys

import pytest
import torch
from fresh_process import run_without_casan_hf
from tiny_models import padded_batch, tiny_config

from casan_hf import CasanModel, context_mixer
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
