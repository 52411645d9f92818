"""Checkpoints saved by an earlier casan-hf load with the current code: same keys, identical outputs."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import casan_hf


FIXTURES = Path(__file__).parent / "fixtures" / "legacy_checkpoints"
FOLDERS = sorted(path for path in FIXTURES.iterdir() if path.is_dir())


@pytest.mark.parametrize("folder", FOLDERS, ids=[folder.name for folder in FOLDERS])
def test_earlier_checkpoint_loads_with_identical_outputs(folder):
    config = casan_hf.CasanConfig.from_pretrained(folder)
    model_class = getattr(casan_hf, config.architectures[0])
    model, info = model_class.from_pretrained(folder, output_loading_info=True)
    assert not any(info.values()), info
    inputs = load_file(folder / "inputs.safetensors")
    expected = load_file(folder / "expected_outputs.safetensors")
    with torch.no_grad():
        outputs = model.eval()(
            **inputs,
            output_context_gates=True,
            **({"output_pooling_attentions": True} if "pooling_attentions" in expected else {}),
        )
    for name, tensor in expected.items():
        actual = torch.stack(outputs.context_gates) if name == "context_gates" else outputs[name]
        assert torch.equal(actual, tensor), name
