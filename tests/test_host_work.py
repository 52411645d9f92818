"""What a GPU step waits on: CASAN's forward and backward never wait for the device (no `.item()`, `bool(tensor)`
or data-dependent shape inside them), and a compiled training step (the recipe of docs/SCALING.md) gives eager's
losses with one graph for every step of one shape."""

import pytest
import torch
from test_translation_model import TINY_MARIAN
from tiny_models import padded_batch, tiny_config
from torch._dynamo.testing import CompileCounterWithBackend
from torch.utils._python_dispatch import TorchDispatchMode

from casan_hf import CasanForSequenceClassification, CasanMarianConfig, CasanMarianMTModel, CasanModel, fused_mixer
from casan_hf.benchmark import fused_host_work
from casan_hf.compat import create_bidirectional_mask
from casan_hf.context import run_layers_with_context
from casan_hf.options import GATE_KINDS


# The operators that copy a device tensor's value to the host (`.item()` and `bool(tensor)` run the first) or
# whose output shape depends on values, so that the host waits for the device.
SYNCING_OPERATORS = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.nonzero.default}


class RefuseHostSync(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in SYNCING_OPERATORS:
            raise AssertionError(f"{func} waits for the device")
        return func(*args, **(kwargs or {}))


def test_the_guard_catches_item_bool_and_nonzero():
    tensor = torch.ones(3)
    for wait in (lambda: tensor.sum().item(), lambda: bool(tensor.sum() > 0), lambda: tensor.nonzero()):
        with pytest.raises(AssertionError, match="waits for the device"), RefuseHostSync():
            wait()


@pytest.mark.parametrize("gate_per_head", [False, True], ids=["shared-gate", "gate-per-head"])
@pytest.mark.parametrize("context_type", ["none", "global", "deep", "deep_global"])
def test_the_encoder_forward_and_backward_never_wait_for_the_device(context_type, gate_per_head):
    """The encoder and its context, forward and backward, on a padded batch. The padding mask is made outside:
    transformers' own check of it (`create_bidirectional_mask`) syncs for BERT alike."""
    if gate_per_head and context_type == "none":
        pytest.skip("`gate_per_head` shapes a gate that `none` does not have")
    torch.manual_seed(0)
    model = CasanModel(tiny_config(context_type=context_type, gate_per_head=gate_per_head)).train()
    input_ids, attention_mask = padded_batch([6, 3])
    embeddings = model.embeddings(input_ids=input_ids)
    mask = create_bidirectional_mask(config=model.config, inputs_embeds=embeddings, attention_mask=attention_mask)
    with RefuseHostSync():
        hidden = model.encoder(embeddings, attention_mask=mask, token_mask=attention_mask)
        hidden.square().mean().backward()
    assert all(p.grad is not None for name, p in model.named_parameters() if "context_mixer" in name)


@pytest.mark.parametrize("gate", GATE_KINDS)
@pytest.mark.parametrize("context_type", fused_host_work.CONTEXT_TYPES)
def test_the_fused_mixer_never_waits_for_the_device(context_type, gate):
    """The mixer's fused path, its launches stubbed as on a GPU (`fused_host_work.stubbed_launches`): twice forward
    and backward (the second time through the cached compiled kernels), with each gate."""
    mixer, query, key, context = fused_host_work.mixer_and_inputs(context_type, gate=gate)
    with fused_host_work.stubbed_launches():
        with RefuseHostSync():
            for _ in range(2):
                mixed_query, mixed_key, gates = mixer(query, key, context)
                (mixed_query.sum() + mixed_key.sum() + gates.sum()).backward()
        assert all(launches.compiled for launches in (fused_mixer.FORWARD_LAUNCHES, fused_mixer.BACKWARD_LAUNCHES))


def test_the_translation_encoder_never_waits_for_the_device():
    torch.manual_seed(0)
    config = CasanMarianConfig(
        **{**TINY_MARIAN, "encoder_layers": 2, "decoder_layers": 1},
        context_type="deep_global",
    )  # fmt: skip
    encoder = CasanMarianMTModel(config).get_encoder().train()
    input_ids, attention_mask = padded_batch([6, 3], vocab_size=60)
    embeddings = encoder.embed_tokens(input_ids)
    mask = create_bidirectional_mask(config=config, inputs_embeds=embeddings, attention_mask=attention_mask)
    hidden = embeddings + encoder.embed_positions(embeddings.shape[:-1])
    with RefuseHostSync():
        output = run_layers_with_context(encoder.context_plan, encoder.layers, hidden, mask, attention_mask)
        output.square().mean().backward()


@pytest.mark.parametrize("context_type", ["global", "deep_global"])
def test_a_compiled_training_step_gives_eagers_losses_with_one_graph(context_type):
    """Three optimiser steps of sequence classification, eager and compiled with inductor (what `--torch_compile`
    runs) from the same weights, on batches of one padded shape: the same losses, and no recompile after the first
    step (the weights change in place between steps; the padding differs). Without `problem_type` in the config,
    transformers' loss sets it at the first call and the second step recompiles."""
    losses = {}
    for compiled in (False, True):
        torch.manual_seed(0)
        model = CasanForSequenceClassification(
            tiny_config(
                context_type=context_type,
                num_hidden_layers=2,
                gate_bias_init=0.0,
                problem_type="single_label_classification",  # as run_glue.py sets it: the loss would set it once
            )
        ).train()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        counter = CompileCounterWithBackend("inductor")
        step_model = torch.compile(model, backend=counter, fullgraph=True) if compiled else model
        losses[compiled] = []
        for seed, lengths in enumerate(([6, 3], [4, 6], [6, 5])):
            input_ids, attention_mask = padded_batch(lengths, seed=seed)
            loss = step_model(input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 1])).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses[compiled].append(loss.item())
        if compiled:
            assert counter.frame_count == 1, f"{counter.frame_count} graphs for three steps of one shape"
    torch._dynamo.reset()
    assert losses[True] == pytest.approx(losses[False], rel=1e-4, abs=1e-5)
