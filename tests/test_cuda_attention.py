"""On a GPU, what a bf16 user gets by default: sdpa's flash kernel gives every family's CASAN model the outputs of
sdpa's math backend, and a padded batch (which sdpa runs with a mask, so not through flash) the outputs of eager
attention on every real token. Skipped without CUDA; `scripts/device/shard.sh speed` runs it on the device."""

import pytest
import torch
from tiny_models import FAMILY_TINY, padded_batch, tiny_config
from torch.nn.attention import SDPBackend, sdpa_kernel

from casan_hf import casan_class


pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (scripts/device/shard.sh)")

# bf16 keeps 8 bits of mantissa: two kernels that sum in different orders differ by a few of its steps.
BF16 = dict(atol=3e-2, rtol=3e-2)
# Flash attention takes head sizes that are multiples of 8: 64 / 4 heads = 16.
SIZE = dict(hidden_size=64, num_attention_heads=4)


def bf16_model(family, context_type, attn_implementation):
    torch.manual_seed(0)
    config = tiny_config(family, context_type=context_type, **SIZE)
    config._attn_implementation = attn_implementation
    return casan_class(family, "base")(config).to("cuda", torch.bfloat16).eval()


@pytest.mark.parametrize("context_type", ["none", "global", "deep", "deep_global"])
@pytest.mark.parametrize("family", list(FAMILY_TINY))
def test_flash_kernel_equals_the_math_backend(family, context_type):
    model = bf16_model(family, context_type, "sdpa")
    input_ids, _ = padded_batch([12, 12, 12])  # no padding, so no mask: flash can run
    input_ids = input_ids.cuda()
    with torch.no_grad():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION), torch.profiler.profile() as profile:
            flash = model(input_ids).last_hidden_state  # with only the flash backend allowed, no other can run
        with sdpa_kernel(SDPBackend.MATH):
            math = model(input_ids).last_hidden_state
    assert any("flash" in event.key for event in profile.key_averages()), "no flash attention op ran"
    torch.testing.assert_close(flash, math, **BF16)


@pytest.mark.parametrize("context_type", ["none", "global", "deep", "deep_global"])
@pytest.mark.parametrize("family", list(FAMILY_TINY))
def test_padded_batch_under_sdpa_equals_eager(family, context_type):
    input_ids, attention_mask = (tensor.cuda() for tensor in padded_batch([12, 5, 9]))
    outputs = {}
    for implementation in ("eager", "sdpa"):
        with torch.no_grad():
            model = bf16_model(family, context_type, implementation)
            outputs[implementation] = model(input_ids, attention_mask=attention_mask).last_hidden_state
    real = attention_mask.bool()
    torch.testing.assert_close(outputs["sdpa"][real], outputs["eager"][real], **BF16)
