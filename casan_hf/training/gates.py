"""The gates watched during training: the context gates' mean per layer (and head) over the real tokens of the
evaluation data, and with an output gate its mean and its share of values under `SPARSE_BELOW` (how much of the
heads' output it closes), logged at each evaluation. They say whether the context is used at all: a context that
stays unused keeps its gates near their start, sigmoid(gate_bias_init).

The log's keys are `casan_hf.hub.gate_log`'s, which the model card and the studies' records read too."""

import torch
from transformers import TrainerCallback

from ..hub.gate_log import OUTPUT_GATE_FIGURES, gate_key, output_gate_key
from ..options import CONTEXT_TARGETS


# An output gate value under this counts as closed (Qiu et al. 2025 report their gates' share under 0.1).
SPARSE_BELOW = 0.1


@torch.no_grad()
def gate_means(model, batches):
    """`{"gates/layer_<i>/<query|key>": mean over the real tokens}` of a CASAN model on `batches` (dicts of model
    inputs, e.g. from the evaluation dataloader); layers and targets without context read 0. With a gate per
    head, that is the mean over the heads too, and `"gates/layer_<i>/<query|key>/head_<h>"` each head's mean. A
    translation model's context is in its encoder, which reads the source side of the batches. With an output gate,
    `"head_gates/layer_<i>/mean"` and `"head_gates/layer_<i>/sparse"` (the share of its values under
    `SPARSE_BELOW`, over the real tokens and every head or channel)."""
    encoder_decoder = getattr(model.config, "is_encoder_decoder", False)
    attends = model.get_encoder() if encoder_decoder else model
    output_gated = getattr(model.config, "output_gate", None) is not None
    sums, head_sums, tokens = None, None, 0
    for batch in batches:
        names = ("input_ids", "attention_mask") if encoder_decoder else [name for name in batch if name != "labels"]
        inputs = {name: batch[name].to(model.device) for name in names if name in batch}
        outputs = attends(**inputs, output_context_gates=True, output_head_gates=output_gated)
        gates = torch.stack(outputs.context_gates).float()
        if gates.dim() == 4:  # one gate per token: (layers, b, 2, n), as one head
            gates = gates.unsqueeze(3)
        mask = inputs.get("attention_mask", torch.ones(gates.shape[1], gates.shape[-1], device=gates.device))
        mask = mask.reshape(gates.shape[1], -1).float()  # multiple choice: one row per choice
        batch_sums = (gates * mask[None, :, None, None, :]).sum(dim=(1, 4))  # (layers, 2, heads)
        sums = batch_sums if sums is None else sums + batch_sums
        if output_gated:
            head_gates = torch.stack(outputs.head_gates).float()  # (layers, b, n, heads or d)
            weights = mask[None, :, :, None] / head_gates.shape[-1]
            batch_head_sums = torch.stack(
                [(head_gates * weights).sum(dim=(1, 2, 3)), ((head_gates < SPARSE_BELOW) * weights).sum(dim=(1, 2, 3))]
            )
            head_sums = batch_head_sums if head_sums is None else head_sums + batch_head_sums
        tokens += int(mask.sum())
    means = (sums / max(tokens, 1)).cpu()
    logged = {}
    if output_gated:
        head_means = (head_sums / max(tokens, 1)).cpu()
        for layer in range(head_means.shape[1]):
            for index, figure in enumerate(OUTPUT_GATE_FIGURES):
                logged[output_gate_key(layer, figure)] = round(float(head_means[index, layer]), 6)
    for layer in range(means.shape[0]):
        for channel, target in enumerate(CONTEXT_TARGETS):
            logged[gate_key(layer, target)] = round(float(means[layer, channel].mean()), 6)
            if means.shape[2] > 1:
                for head, value in enumerate(means[layer, channel].tolist()):
                    logged[gate_key(layer, target, head)] = round(value, 6)
    return logged


class GateMonitor(TrainerCallback):
    """Logs the mean query and key gate of every layer at each evaluation, into `trainer_state.json`'s log
    history (and `latest`, which the model card reads). The gates are taken, in eval mode, over the first
    `batches` batches of the evaluation dataloader. Every process takes them (a model sharded over the processes
    runs only in all of them together); the first one's are logged."""

    def __init__(self, batches=4):
        self.batches = batches
        self.latest = None

    def on_evaluate(self, args, state, control, model=None, eval_dataloader=None, **kwargs):
        if model is None or eval_dataloader is None:
            return
        training = model.training
        model.eval()
        try:
            batches = (batch for _, batch in zip(range(self.batches), eval_dataloader, strict=False))
            self.latest = gate_means(model, batches)
        finally:
            model.train(training)
        if state.is_world_process_zero:
            state.log_history.append({**self.latest, "epoch": state.epoch, "step": state.global_step})
