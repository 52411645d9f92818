"""Training CASAN with `Trainer`: a learning rate of its own for the context parameters, and the context
gates watched at each evaluation. Both scripts (`run_glue.py`, `run_mlm.py`) use them through `CasanTrainer`.

The context parameters are new where every other weight is pretrained; Context-Guided BERT (Wu & Ong, AAAI
2021) trains such parameters at 10x the base learning rate. The gates say whether the context is used at all:
they start near sigmoid(gate_bias_init) = 0.018 and a context that stays unused keeps them there.
"""

from dataclasses import dataclass, field

import torch
from transformers import Trainer, TrainerCallback


# Every parameter CASAN adds to BERT's attention lives in a layer's `context_mixer`.
CONTEXT_PARAMETER = ".context_mixer."


@dataclass
class CasanTrainingArguments:
    """How the context trains and is watched; the flags every CASAN training script takes."""

    context_learning_rate: float | None = field(
        default=None,
        metadata={"help": "Peak learning rate of the context parameters (the rest use --learning_rate), e.g. 10x it."},
    )
    monitor_gates: bool = field(
        default=True,
        metadata={"help": "Log the mean query and key gate of every layer at each evaluation (CASAN models)."},
    )
    gate_batches: int = field(
        default=4, metadata={"help": "How many evaluation batches the gate means are taken over."}
    )

    def __post_init__(self):
        if self.context_learning_rate is not None and not self.context_learning_rate > 0:
            raise ValueError(f"--context_learning_rate must be a positive number; got {self.context_learning_rate}.")
        if self.gate_batches <= 0:
            raise ValueError(f"--gate_batches must be a positive number of batches; got {self.gate_batches}.")


def give_context_its_learning_rate(optimizer, model, learning_rate):
    """Moves the context parameters of every param group of a freshly built `optimizer` into a group of their
    own (same weight decay) at `learning_rate`. The scheduler, built after the optimizer, then warms up and
    decays each group from its own peak."""
    context = {id(p) for name, p in model.named_parameters() if CONTEXT_PARAMETER in name}
    if not context:
        raise ValueError("--context_learning_rate needs a CASAN model with context; this model has none.")
    for group in list(optimizer.param_groups):
        params = [p for p in group["params"] if id(p) in context]
        if params:
            group["params"] = [p for p in group["params"] if id(p) not in context]
            optimizer.add_param_group({**{k: v for k, v in group.items() if k != "params"}, "params": params})
            optimizer.param_groups[-1]["lr"] = learning_rate
            optimizer.param_groups[-1]["initial_lr"] = learning_rate
    return optimizer


class CasanTrainer(Trainer):
    """A `Trainer` that gives the context parameters `context_learning_rate` when one is set."""

    def __init__(self, *args, context_learning_rate=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.context_learning_rate = context_learning_rate

    def create_optimizer(self, model=None):
        optimizer = super().create_optimizer(model)
        if self.context_learning_rate is not None:
            give_context_its_learning_rate(
                optimizer, self.model if model is None else model, self.context_learning_rate
            )
        return optimizer


@torch.no_grad()
def gate_means(model, batches):
    """`{"gates/layer_<i>/<query|key>": mean over the real tokens}` of a CASAN model on `batches` (dicts of model
    inputs, e.g. from the evaluation dataloader); layers and targets without context read 0."""
    sums, tokens = None, 0
    for batch in batches:
        inputs = {name: value.to(model.device) for name, value in batch.items() if name != "labels"}
        gates = torch.stack(model(**inputs, output_context_gates=True).context_gates)  # (layers, batch, 2, n)
        mask = inputs.get("attention_mask", torch.ones(gates.shape[1], gates.shape[-1], device=gates.device))
        mask = mask.reshape(gates.shape[1], -1).to(gates.dtype)  # multiple choice: one row per choice
        batch_sums = (gates * mask[None, :, None, :]).sum(dim=(1, 3))
        sums = batch_sums if sums is None else sums + batch_sums
        tokens += int(mask.sum())
    means = (sums / max(tokens, 1)).float().cpu()
    return {
        f"gates/layer_{layer}/{target}": round(float(means[layer, channel]), 6)
        for layer in range(means.shape[0])
        for channel, target in enumerate(("query", "key"))
    }


class GateMonitor(TrainerCallback):
    """Logs the mean query and key gate of every layer at each evaluation, into `trainer_state.json`'s log
    history (and `latest`, which the model card reads). The gates are taken, in eval mode, over the first
    `batches` batches of the evaluation dataloader."""

    def __init__(self, batches=4):
        self.batches = batches
        self.latest = None

    def on_evaluate(self, args, state, control, model=None, eval_dataloader=None, **kwargs):
        if model is None or eval_dataloader is None or not state.is_world_process_zero:
            return
        training = model.training
        model.eval()
        try:
            batches = (batch for _, batch in zip(range(self.batches), eval_dataloader, strict=False))
            self.latest = gate_means(model, batches)
        finally:
            model.train(training)
        state.log_history.append({**self.latest, "epoch": state.epoch, "step": state.global_step})


__all__ = [
    "CONTEXT_PARAMETER",
    "CasanTrainer",
    "CasanTrainingArguments",
    "GateMonitor",
    "gate_means",
    "give_context_its_learning_rate",
]
