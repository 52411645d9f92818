"""Training CASAN with `Trainer`: a learning rate of its own for the context parameters, and the context
gates watched at each evaluation (`gates.GateMonitor`). Every training script uses them through `CasanTrainer`.

The context parameters are new where every other weight is pretrained; Context-Guided BERT (Wu & Ong, AAAI
2021) trains such parameters at 10x the base learning rate. The gates say whether the context is used at all:
they start near sigmoid(gate_bias_init) = 0.018 and a context that stays unused keeps them there.
"""

import os
from dataclasses import dataclass, field
from pathlib import Path

from transformers import Seq2SeqTrainer, Trainer, TrainerCallback
from transformers.trainer import TRAINER_STATE_NAME, TrainerState
from transformers.trainer_utils import TrainOutput, get_last_checkpoint
from transformers.utils import CONFIG_NAME

from ..context import is_casan_parameter
from ..hub import is_hub_id, render_model_card, render_translation_card, write_model_card
from ..hub.push import FolderCheckError, check_repo_id, push_folder
from .gates import GateMonitor
from .preemption import SaveAndStopOnSignal, exit_if_preempted


@dataclass
class CasanTrainingArguments:
    """How the context trains and is watched; the flags every CASAN training script takes."""

    context_learning_rate: float | None = field(
        default=None,
        metadata={
            "help": "Peak learning rate of the parameters CASAN adds (the context mixer's and the output gate's; the "
            "rest use --learning_rate), e.g. 10x it."
        },
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


def has_context(model):
    """Whether the model has parameters CASAN adds (a context mixer or an output gate)."""
    return any(is_casan_parameter(name) for name, _ in model.named_parameters())


def check_training_options(model, casan_training):
    """Refuses a context learning rate for a model without context (plain BERT, context_type "none")."""
    if casan_training.context_learning_rate is not None and not has_context(model):
        raise ValueError(
            "--context_learning_rate needs a CASAN model with context or an output gate; this model has neither."
        )


def gate_monitor_for(model, casan_training):
    """The run's GateMonitor, or None: the gates are watched by default for every model with context or an output
    gate."""
    return GateMonitor(casan_training.gate_batches) if casan_training.monitor_gates and has_context(model) else None


def give_context_its_learning_rate(optimizer, model, learning_rate):
    """Moves the parameters CASAN adds (`is_casan_parameter`) of every param group of a freshly built `optimizer`
    into a group of their own (same weight decay) at `learning_rate`. The scheduler, built after the optimizer,
    then warms up and decays each group from its own peak."""
    context = {id(p) for name, p in model.named_parameters() if is_casan_parameter(name)}
    if not context:
        raise ValueError("a context learning rate needs a CASAN model with context or an output gate; it has neither.")
    for group in list(optimizer.param_groups):
        params = [p for p in group["params"] if id(p) in context]
        if params:
            group["params"] = [p for p in group["params"] if id(p) not in context]
            optimizer.add_param_group({**{k: v for k, v in group.items() if k != "params"}, "params": params})
            optimizer.param_groups[-1]["lr"] = learning_rate
            optimizer.param_groups[-1]["initial_lr"] = learning_rate
    return optimizer


def is_new_parameter(name):
    """Whether a parameter is new to a pretrained encoder: what CASAN adds (`is_casan_parameter`), or the masked-LM
    head (`cls.*`)."""
    return is_casan_parameter(name) or name.startswith("cls.")


def freeze_pretrained(model):
    """Freezes every parameter but the new ones and returns the frozen. A weight tied to a pretrained one (the
    MLM decoder, tied to the word embeddings) is listed under the pretrained name, so it stays frozen."""
    frozen = [parameter for name, parameter in model.named_parameters() if not is_new_parameter(name)]
    for parameter in frozen:
        parameter.requires_grad_(False)
    return frozen


class Unfreeze(TrainerCallback):
    """Lets the `frozen` parameters train from optimizer step `step` on (also when a run resumes past it)."""

    def __init__(self, frozen, step):
        self.frozen, self.step = frozen, step

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step >= self.step and not self.frozen[0].requires_grad:
            for parameter in self.frozen:
                parameter.requires_grad_(True)


class EndWhenResumedAtTheLastStep(TrainerCallback):
    """A run resumed from the checkpoint of its last step (`max_steps`) has only the end of training left: that
    checkpoint was saved after the step's evaluation and its epoch's end. Trainer would go on into that epoch when
    `max_steps` is not a whole number of epochs: `CasanTrainer` draws no batch past the last step
    (`get_batch_samples`), and this callback cancels the end of that epoch (its evaluation, log and save)."""

    resumed_at_the_end = False

    def on_train_begin(self, args, state, control, **kwargs):
        self.resumed_at_the_end = state.global_step >= state.max_steps

    def on_epoch_end(self, args, state, control, **kwargs):
        if self.resumed_at_the_end:
            control.should_evaluate = control.should_log = control.should_save = False


class CasanTrainer(Trainer):
    """A `Trainer` for CASAN runs.

    - `context_learning_rate`: the context parameters' own peak learning rate (None: the base one).
    - `frozen` and `unfreeze_after`: parameters that do not train until optimizer step `unfreeze_after` (never,
      if None). They sit in the optimizer from the start without gradients, which AdamW leaves untouched,
      weight decay included, so that they train on the same schedule once they are let go.
    - a data collator with a `resume_at(batches)` method is told, when a run resumes, how many training batches
      the checkpoint's steps drew: one that draws each batch's randomness from (seed, batch index) then gives the
      resumed run the uninterrupted one's batches. (Randomness drawn from one stream cannot be resumed exactly:
      the dataloader draws a batch ahead of training, and Trainer restores the global RNG only after it has drawn
      the first batch after the resume.)
    - `preemption`: a `preemption.SaveAndStopOnSignal` among its callbacks, which `train_and_save` lets note the
      cluster's signals: a signalled run saves the checkpoint of its step and ends `train()` there, without
      Trainer's end of training. A run resumed from the checkpoint of its last step trains no further
      (`EndWhenResumedAtTheLastStep`).
    - `card_kwargs`: the model card is casan_hf's (`render_card`: `hub.render_model_card`, or
      `hub.render_translation_card` for `CasanSeq2SeqTrainer`), with the scores of `card_eval_metrics` and the gates
      of `gate_monitor`, which is also a callback of the run.
    - `--push_to_hub` uploads the output folder once, at the end, through `hub.push.push_folder`: its checks pass
      before the repository is created or anything is sent (no repository at the start, no checkpoint pushes).
    """

    render_card = staticmethod(render_model_card)

    def __init__(
        self,
        *args,
        context_learning_rate=None,
        frozen=(),
        unfreeze_after=None,
        card_kwargs=None,
        gate_monitor=None,
        **kwargs,
    ):
        callbacks = list(kwargs.pop("callbacks", None) or []) + ([gate_monitor] if gate_monitor else [])
        if unfreeze_after is not None:
            if not frozen:
                raise ValueError("unfreeze_after needs frozen parameters to let go.")
            callbacks.append(Unfreeze(frozen, unfreeze_after))
        super().__init__(*args, callbacks=callbacks or None, **kwargs)
        base_model = (card_kwargs or {}).get("base_model")
        if self.args.push_to_hub and base_model is not None and not is_hub_id(base_model):
            raise ValueError(  # the push's card check would refuse the folder at the end of the run
                f"--push_to_hub: the card names the checkpoint the run starts from by its Hub id, and {base_model!r} "
                "is a local folder; pass --base_model with its Hub id."
            )
        if self.args.push_to_hub:  # the push would refuse it at the end of the run
            try:
                check_repo_id(self.args.hub_model_id or Path(self.args.output_dir).absolute().name)
            except FolderCheckError as error:
                raise ValueError(f"--push_to_hub: pass --hub_model_id you/name; {error}") from None
        self.context_learning_rate = context_learning_rate
        self.frozen = list(frozen)
        self.card_kwargs = card_kwargs
        self.card_eval_metrics = {}
        self.gate_monitor = gate_monitor
        self.preemption = SaveAndStopOnSignal(self.accelerator)
        for callback in (EndWhenResumedAtTheLastStep(), self.preemption):
            self.add_callback(callback)

    def create_optimizer(self, model=None):
        for parameter in self.frozen:  # in the optimizer, without gradients until they are let go
            parameter.requires_grad_(True)
        try:
            optimizer = super().create_optimizer(model)
        finally:
            for parameter in self.frozen:
                parameter.requires_grad_(False)
        if self.context_learning_rate is not None:
            give_context_its_learning_rate(
                optimizer, self.model if model is None else model, self.context_learning_rate
            )
        return optimizer

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        """No batch past the last step: a run resumed from the checkpoint of its last step trains no further."""
        if self.state.global_step >= self.state.max_steps:
            return [], None
        return super().get_batch_samples(epoch_iterator, num_batches, device)

    def _finalize_training(self, trial, *args, **kwargs):
        """Trainer's end of training, unless a signal stopped the run (`preemption`): then the checkpoint of its step
        is saved if it does not hold everything done at that step, and the end (the best model loaded, every
        checkpoint but the best deleted under `save_total_limit=1`) is left to the resumed run."""
        if not self.preemption.stop_at_the_end(self.args, self.state):
            return super()._finalize_training(trial, *args, **kwargs)
        if not self.preemption.is_saved(self.state):
            self._save_checkpoint(self.model_wrapped, trial)
        return TrainOutput(self.state.global_step, None, {})

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        if resume_from_checkpoint is True:
            resume_from_checkpoint = get_last_checkpoint(self.args.output_dir)
        if resume_from_checkpoint is not None and hasattr(self.data_collator, "resume_at"):
            state = TrainerState.load_from_json(os.path.join(resume_from_checkpoint, TRAINER_STATE_NAME))
            self.data_collator.resume_at(state.global_step * self.args.gradient_accumulation_steps)
        return super().train(resume_from_checkpoint, *args, **kwargs)

    def init_hf_repo(self, token=None, private=None):
        """The repository is named here and created by the push, once the folder has passed its checks."""
        self.hub_model_id = self.args.hub_model_id or Path(self.args.output_dir).absolute().name

    def _push_from_checkpoint(self, checkpoint_folder):
        """Checkpoints are not pushed: the folder goes up once, checked, at the end of the run."""

    def push_to_hub(self, commit_message="End of training", blocking=True, token=None, revision=None, private=None,
                    **kwargs):  # fmt: skip
        """Saves the model and writes its card, as Trainer's push does, then `push_folder`: the checks, and one
        commit of the folder's `upload_files`. It returns the commit's `CommitInfo` once the upload is done
        (`blocking=False` is not taken: the checks come first); `kwargs`, Trainer's card arguments, are not read,
        since the card is casan_hf's."""
        if self.hub_model_id is None:
            self.init_hf_repo()
        self.save_model(_internal_call=True)
        if not self.is_world_process_zero():
            return None
        self.create_model_card()
        _, commit = push_folder(
            self.args.output_dir,
            self.hub_model_id,
            revision=revision or self.args.hub_revision,
            private=self.args.hub_private_repo if private is None else private,
            token=token or self.args.hub_token,
            commit_message=commit_message,
        )
        return commit

    def create_model_card(self, **kwargs):
        if self.card_kwargs is None:
            return super().create_model_card(**kwargs)
        if not self.is_world_process_zero():
            return
        model_name = self.args.hub_model_id or Path(self.args.output_dir).name
        gates = self.gate_monitor.latest if self.gate_monitor else None
        card = self.render_card(
            self.model, model_name, eval_metrics=self.card_eval_metrics, gates=gates, **self.card_kwargs
        )
        write_model_card(self.args.output_dir, card)


class CasanSeq2SeqTrainer(CasanTrainer, Seq2SeqTrainer):
    """`CasanTrainer` for sequence-to-sequence models: `Seq2SeqTrainer`'s generation in evaluation and prediction
    (`--predict_with_generate`), with the context's own learning rate and the gate monitor of every CASAN run."""

    render_card = staticmethod(render_translation_card)


def train_and_save(trainer, checkpoint, train_samples):
    """Trains (from `checkpoint`, None: from the start), saves the model and logs and saves the training metrics.
    With `--push_to_hub` the model is saved by the push at the end of the run, once the card holds the scores
    (`save_model` would push too). A SIGTERM or SIGUSR1 while it trains saves a checkpoint at the end of that step
    and exits with `preemption.PREEMPTED_EXIT_CODE` (`preemption.SaveAndStopOnSignal`)."""
    with trainer.preemption.noting_signals():
        train_result = trainer.train(resume_from_checkpoint=checkpoint)
    exit_if_preempted(trainer)
    if not trainer.args.push_to_hub:
        trainer.save_model()  # weights, config with auto_map, code files, tokenizer, training_args.bin
    metrics = {**train_result.metrics, "train_samples": train_samples}
    trainer.log_metrics("train", metrics)
    trainer.save_metrics("train", metrics)


def finish_run(trainer):
    """How every script's run ends, after its evaluation: the trainer state saved (its log history then holds the
    final scores and gates); with `--push_to_hub` the folder uploaded (the push saves the model and writes its card
    first), otherwise the card written beside the model the folder holds (none after an evaluation alone)."""
    if trainer.args.do_train:
        trainer.save_state()
    if trainer.args.push_to_hub:
        trainer.push_to_hub()
    elif os.path.isfile(os.path.join(trainer.args.output_dir, CONFIG_NAME)):
        trainer.create_model_card()


def card_hyperparameters(training_args, casan_training, first=None, **specific):
    """The hyper-parameters a run's model card lists: `first` (what the run started from), the optimisation every
    script shares, the script's `specific` ones, then the seed."""
    return {
        **(first or {}),
        "learning_rate": training_args.learning_rate,
        "context_learning_rate": casan_training.context_learning_rate,
        "per_device_train_batch_size": training_args.per_device_train_batch_size,
        "world_size": training_args.world_size,
        "num_train_epochs": training_args.num_train_epochs,
        "max_steps": training_args.max_steps,
        **specific,
        "seed": training_args.seed,
    }
