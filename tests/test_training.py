"""The context's own learning rate, the gate monitor and the stop on a signal (casan_hf.training), alone and
through run_glue.py."""

import collections
import os
import signal

import pytest
import torch
import transformers
from accelerate import Accelerator
from tiny_models import padded_batch, tiny_config
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from casan_hf import CasanForSequenceClassification
from casan_hf.context import is_casan_parameter
from casan_hf.training import (
    CasanTrainer,
    CasanTrainingArguments,
    PreemptionAndResume,
    gate_means,
    give_context_its_learning_rate,
)
from casan_hf.training.trainer import repository_name


def trainer_for(tmp_path, context_learning_rate, **options):
    torch.manual_seed(0)
    model = CasanForSequenceClassification(tiny_config(num_labels=2, **options))
    args = TrainingArguments(output_dir=str(tmp_path), learning_rate=1e-5, weight_decay=0.01, report_to="none")
    return CasanTrainer(model=model, args=args, context_learning_rate=context_learning_rate)


def test_the_optimizer_holds_the_context_at_its_own_rate(tmp_path):
    trainer = trainer_for(tmp_path, 1e-3, context_type="deep_global")
    optimizer = trainer.create_optimizer()
    rate = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    decay = {id(p): group["weight_decay"] for group in optimizer.param_groups for p in group["params"]}
    named = dict(trainer.model.named_parameters())
    assert len(rate) == sum(1 for group in optimizer.param_groups for _ in group["params"]) == len(named)
    assert any(is_casan_parameter(name) for name in named)
    for name, parameter in named.items():
        assert rate[id(parameter)] == (1e-3 if is_casan_parameter(name) else 1e-5), name
    # Weight decay follows transformers' rule for both rates: biases and LayerNorm weights take none.
    assert decay[id(named["bert.encoder.layer.0.attention.self.context_mixer.context_weight"])] == 0.01
    assert decay[id(named["bert.encoder.layer.0.attention.self.context_mixer.gate_bias"])] == 0.0
    # The scheduler warms up and decays each group from its own peak.
    scheduler = trainer.create_scheduler(num_training_steps=10, optimizer=optimizer)
    assert sorted(set(scheduler.base_lrs)) == [1e-5, 1e-3]


def test_without_a_context_rate_every_parameter_takes_the_base_rate(tmp_path):
    optimizer = trainer_for(tmp_path, None, context_type="global").create_optimizer()
    assert {group["lr"] for group in optimizer.param_groups} == {1e-5}


def test_a_context_rate_needs_context(tmp_path):
    with pytest.raises(ValueError, match="needs a CASAN model with context"):
        trainer_for(tmp_path, 1e-3, context_type="none").create_optimizer()
    with pytest.raises(ValueError, match="unfreeze_after needs frozen parameters"):
        CasanTrainer(model=CasanForSequenceClassification(tiny_config()), unfreeze_after=1)
    with pytest.raises(ValueError, match="--context_learning_rate must be a positive number; got 0"):
        CasanTrainingArguments(context_learning_rate=0)


def test_gate_means_average_the_real_tokens_only():
    torch.manual_seed(0)
    model = CasanForSequenceClassification(tiny_config(context_type="deep", gate_bias_init=0.0)).eval()
    input_ids, attention_mask = padded_batch([6, 3])
    gates = gate_means(model, [{"input_ids": input_ids, "attention_mask": attention_mask}])
    assert sorted(gates) == sorted(f"gates/layer_{i}/{t}" for i in range(3) for t in ("query", "key"))
    assert gates["gates/layer_0/query"] == 0.0  # deep context: the first layer takes none
    with torch.no_grad():
        layer_gates = model(input_ids, attention_mask=attention_mask, output_context_gates=True).context_gates[1]
    real = attention_mask.bool()
    assert gates["gates/layer_1/key"] == pytest.approx(layer_gates[:, 1][real].mean().item(), abs=1e-6)
    alone = gate_means(model, [{"input_ids": input_ids[1:, :3], "attention_mask": attention_mask[1:, :3]}])
    padded = gate_means(model, [{"input_ids": input_ids[1:], "attention_mask": attention_mask[1:]}])
    assert alone == pytest.approx(padded, abs=1e-6)


def test_gate_means_with_a_gate_per_head_give_each_head_and_their_mean():
    torch.manual_seed(0)
    config = tiny_config(context_type="global", gate_bias_init=0.0, gate_per_head=True)
    model = CasanForSequenceClassification(config).eval()
    input_ids, attention_mask = padded_batch([6, 3])
    gates = gate_means(model, [{"input_ids": input_ids, "attention_mask": attention_mask}])
    with torch.no_grad():
        layer_gates = model(input_ids, attention_mask=attention_mask, output_context_gates=True).context_gates[2]
    real = attention_mask.bool()
    for head in range(4):
        expected = layer_gates[:, 0, head][real].mean().item()
        assert gates[f"gates/layer_2/query/head_{head}"] == pytest.approx(expected, abs=1e-6)
    heads = [gates[f"gates/layer_2/query/head_{head}"] for head in range(4)]
    assert gates["gates/layer_2/query"] == pytest.approx(sum(heads) / 4, abs=1e-6)


def test_memory_is_pinned_only_with_an_accelerator(monkeypatch):
    """Every training script parses its arguments with parse_run_args, which leaves pinning to an accelerator."""
    from casan_hf.cli.launch import pin_memory_only_with_an_accelerator

    for available in (False, True):
        monkeypatch.setattr(torch.accelerator, "is_available", lambda available=available: available)
        args = pin_memory_only_with_an_accelerator(TrainingArguments(output_dir="unused", report_to="none"))
        assert args.dataloader_pin_memory is available


@pytest.mark.parametrize("epoch, max_steps, cut_short", [(1.5, 20, True), (2.0, 20, False), (1.5, 7, False)])
def test_a_signal_stops_training_at_the_end_of_its_step_and_an_epoch_cut_short_ends_when_resumed(
    tmp_path, epoch, max_steps, cut_short
):
    """The signal is only noted; the end of the step stops training. An epoch cut short by it has
    no end-of-epoch evaluation, log or save (the resumed run ends it); an epoch ended by the same step keeps them,
    as does the last step's epoch. The handlers found are back afterwards."""
    trainer = trainer_for(tmp_path, None)
    stop = PreemptionAndResume(trainer.accelerator)
    state, control = TrainerState(global_step=7, epoch=epoch, max_steps=max_steps), TrainerControl()
    found = signal.getsignal(signal.SIGUSR1)
    with stop.noting_signals():
        os.kill(os.getpid(), signal.SIGUSR1)
        assert not control.should_save and stop.signal_name == "SIGUSR1"
        stop.on_step_end(trainer.args, state, control)
    # The save is CasanTrainer's, at the end of training (`is_saved`), whatever the save options.
    assert not control.should_save and control.should_training_stop and stop.stopped_at == 7
    assert signal.getsignal(signal.SIGUSR1) is found
    control.should_evaluate = control.should_log = control.should_save = True  # as an epoch-end schedule asks
    stop.on_epoch_end(trainer.args, state, control)
    assert (control.should_evaluate, control.should_log, control.should_save) == (not cut_short,) * 3


def test_the_context_rate_is_a_function_of_its_inputs_and_a_second_optimizer_keeps_the_groups(tmp_path):
    """`give_context_its_learning_rate` returns new groups, leaves the ones given as they were, and gives split
    groups back as they are; a second `create_optimizer` (a second `train()`) keeps the groups, none empty."""
    trainer = trainer_for(tmp_path, 1e-3, context_type="deep_global")
    groups = [{"params": list(trainer.model.parameters()), "lr": 1e-5, "weight_decay": 0.0}]
    given = [dict(group, params=list(group["params"])) for group in groups]
    split = give_context_its_learning_rate(groups, trainer.model, 1e-3)
    assert [len(group["params"]) for group in groups] == [len(group["params"]) for group in given]
    assert [group["lr"] for group in split] == [1e-5, 1e-3]
    assert give_context_its_learning_rate(split, trainer.model, 1e-3) == split
    first = [(group["lr"], len(group["params"])) for group in trainer.create_optimizer().param_groups]
    second = [(group["lr"], len(group["params"])) for group in trainer.create_optimizer().param_groups]
    assert first == second and all(count > 0 for _, count in second)


def test_a_trainer_method_relied_on_that_transformers_lacks_is_named_at_construction(tmp_path, monkeypatch):
    monkeypatch.delattr(Trainer, "_finalize_training")
    with pytest.raises(
        RuntimeError, match=rf"Trainer\._finalize_training, which transformers {transformers.__version__}"
    ):
        trainer_for(tmp_path, None)


def test_the_repository_is_named_once_from_the_output_folder(tmp_path, monkeypatch):
    """`--output_dir .` names the repository and the card after the folder the run is in (not an empty name)."""
    monkeypatch.chdir(tmp_path)
    args = TrainingArguments(output_dir=".", report_to="none")
    assert repository_name(args) == tmp_path.name
    assert repository_name(TrainingArguments(output_dir=".", hub_model_id="me/model", report_to="none")) == "me/model"


class CountedOperators(TorchDispatchMode):
    """Counts the torch operators run inside it (`.item()`, a host sync, is one: `_local_scalar_dense`)."""

    def __init__(self, counts):
        super().__init__()
        self.counts = counts

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func)] += 1
        return func(*args, **(kwargs or {}))


def tiny_training(tmp_path, examples, **options):
    """A CasanTrainer of the tiny classifier on `examples` random sentences, two a batch."""
    input_ids, attention_mask = padded_batch([5] * examples)
    rows = zip(input_ids, attention_mask, strict=True)
    data = [{"input_ids": ids, "attention_mask": mask, "labels": n % 2} for n, (ids, mask) in enumerate(rows)]
    torch.manual_seed(0)
    model = CasanForSequenceClassification(tiny_config(num_labels=2))
    options = dict(per_device_train_batch_size=2, report_to="none", dataloader_pin_memory=False, **options)
    return CasanTrainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), **options), train_dataset=data)


def test_an_unsignalled_run_pays_no_operator_sync_or_collective_for_the_signal_check(tmp_path, monkeypatch):
    """In one process every event of the preemption callback of an unsignalled run runs no torch operator (no
    `.item()`, no device work) and asks no other process; in several (a stand-in accelerator of two processes) the
    processes are asked only where Trainer logs (or evaluates or saves), at epoch ends and once after the last
    step."""
    trainer = tiny_training(tmp_path, 8, max_steps=7, logging_steps=3, save_strategy="no")
    counts, asked = collections.Counter(), []
    for name in ("check_trigger", "set_trigger", "reduce", "gather"):
        monkeypatch.setattr(Accelerator, name, lambda *args, name=name, **kwargs: counts.update([name]))
    preemption = trainer.preemption
    for event in [name for name in dir(TrainerCallback) if name.startswith("on_")]:
        method = getattr(preemption, event)

        def counted(*args, method=method, **kwargs):
            with CountedOperators(counts):
                return method(*args, **kwargs)

        monkeypatch.setattr(preemption, event, counted)
    trainer.train()
    assert trainer.state.global_step == 7 and counts == {}

    trainer = tiny_training(tmp_path / "several", 8, max_steps=7, logging_steps=3, save_strategy="no")

    class TwoProcesses:
        num_processes = 2

        def set_trigger(self):
            raise AssertionError("no process was signalled")

        def check_trigger(self):
            asked.append(trainer.state.global_step)
            return False

    trainer.preemption.accelerator = TwoProcesses()
    trainer.train()
    # Logging steps 3 and 6, the epoch end at 4, the end of training (the scripts' runs ask once more, after it).
    assert asked == [3, 4, 6, 7]
