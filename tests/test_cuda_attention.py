"""On a GPU, what a bf16 user gets by default: sdpa's flash kernel gives every family's CASAN model the outputs of
sdpa's math backend, and a padded batch (which sdpa runs with a mask, so not through flash) the outputs of eager
attention on every real token. Skipped without CUDA; `scripts/device/shard.sh speed` runs it on the device."""

import pytest
import torch
import torch.nn.functional as F
from tiny_models import padded_batch, tiny_config
from torch.nn.attention import SDPBackend, sdpa_kernel

from casan_hf import FAMILIES, casan_class


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (scripts/device/shard.sh)")

# bf16 keeps 8 bits of mantissa: two kernels that sum in different orders differ by a few of its steps.
BF16 = dict(atol=3e-2, rtol=3e-2)
# Flash attention takes head sizes that are multiples of 8: 64 / 4 heads = 16.
SIZE = dict(hidden_size=64, num_attention_heads=4)
SDPA_FAMILIES = [family.name for family in FAMILIES if casan_class(family, "base")._supports_sdpa]
# The flash test's batch: no padding, and no longer than ModernBERT's sliding window (transformers builds no mask
# for a window that covers the whole sentence; the tiny config's 4-token window would mask every sliding layer).
FLASH_LENGTH = 12
FLASH_OVERRIDES = {"modernbert": dict(local_attention=32)}  # a window of 16 tokens each side


def tiny_model(family, context_type, attn_implementation, **overrides):
    torch.manual_seed(0)
    config = tiny_config(family, context_type=context_type, **SIZE, **overrides)
    config._attn_implementation = attn_implementation
    return casan_class(family, "base")(config).eval()


def bf16_model(family, context_type, attn_implementation, **overrides):
    return tiny_model(family, context_type, attn_implementation, **overrides).to("cuda", torch.bfloat16)


@pytest.mark.parametrize("family", SDPA_FAMILIES)
def test_flash_batch_reaches_sdpa_without_a_mask(family, monkeypatch):
    """The precondition of the flash test, on any device: every layer calls sdpa with no mask."""
    masks = []

    def recording_sdpa(*args, **kwargs):
        masks.append(kwargs.get("attn_mask"))
        return scaled_dot_product_attention(*args, **kwargs)

    scaled_dot_product_attention = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", recording_sdpa)
    model = tiny_model(family, "global", "sdpa", **FLASH_OVERRIDES.get(family, {}))
    with torch.no_grad():
        model(padded_batch([FLASH_LENGTH] * 3)[0])
    assert len(masks) == model.config.num_hidden_layers and all(mask is None for mask in masks), masks


@needs_cuda
@pytest.mark.parametrize("context_type", ["none", "global", "deep", "deep_global"])
@pytest.mark.parametrize("family", SDPA_FAMILIES)
def test_flash_kernel_equals_the_math_backend(family, context_type):
    model = bf16_model(family, context_type, "sdpa", **FLASH_OVERRIDES.get(family, {}))
    input_ids, _ = padded_batch([FLASH_LENGTH] * 3)  # no padding, so no mask: flash can run
    input_ids = input_ids.cuda()
    with torch.no_grad():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION), torch.profiler.profile() as profile:
            flash = model(input_ids).last_hidden_state  # with only the flash backend allowed, no other can run
        with sdpa_kernel(SDPBackend.MATH):
            math = model(input_ids).last_hidden_state
    assert any("flash" in event.key for event in profile.key_averages()), "no flash attention op ran"
    torch.testing.assert_close(flash, math, **BF16)


@needs_cuda
@pytest.mark.parametrize("context_type", ["none", "global", "deep", "deep_global"])
@pytest.mark.parametrize("family", SDPA_FAMILIES)
def test_padded_batch_under_sdpa_equals_eager(family, context_type):
    input_ids, attention_mask = (tensor.cuda() for tensor in padded_batch([12, 5, 9]))
    outputs = {}
    for implementation in ("eager", "sdpa"):
        with torch.no_grad():
            model = bf16_model(family, context_type, implementation)
            outputs[implementation] = model(input_ids, attention_mask=attention_mask).last_hidden_state
    real = attention_mask.bool()
    torch.testing.assert_close(outputs["sdpa"][real], outputs["eager"][real], **BF16)
