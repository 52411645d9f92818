"""Training CASAN with `Trainer`: a learning rate of its own for the context parameters, and the context
gates watched at each evaluation (`gates.GateMonitor`). Every training script uses them through `CasanTrainer`.

The context parameters are new where every other weight is pretrained; Context-Guided BERT (Wu & Ong, AAAI
2021) trains such parameters at 10x the base learning rate. The gates say whether the context is used at all:
they start near sigmoid(gate_bias_init) = 0.018 and a context that stays unused keeps them there.
"""

import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import transformers
from transformers import Seq2SeqTrainer, Trainer, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, TrainOutput, sort_checkpoints
from transformers.utils import CONFIG_NAME

from ..context import is_casan_parameter
from ..hub import is_hub_id, render_model_card, render_translation_card, write_model_card
from ..hub.checks import FolderCheckError
from ..hub.push import check_repo_id, push_folder
from .gates import GateMonitor
from .preemption import Preempted, PreemptionAndResume


logger = logging.getLogger(__name__)

# The file that marks a checkpoint of the last step saved only so that a signal after it loses nothing: deleted with
# the checkpoint once the run's end is written.
KEPT_FOR_THE_END = "kept_until_the_run_ends.txt"
KEPT_FOR_THE_END_TEXT = (
    "This checkpoint of the run's last step is kept until the run's end (best model, final save and evaluation) is "
    "written: a run stopped before then resumes from it without training a step.\n"
)
# The training's figures (its loss and speeds over the steps trained), written into the checkpoint of the last step
# by the run that trained them and read back by a run resumed there, which trains no step.
TRAINED_FIGURES = "train_figures.json"
# The Trainer methods that are not transformers' documented API and that CasanTrainer overrides or calls: a release
# that renames one would leave an override dead without a word, so they are checked when a CasanTrainer is built.
TRAINER_METHODS_RELIED_ON = ("_finalize_training", "_save_checkpoint", "_push_from_checkpoint", "get_batch_samples")


def check_trainer_methods(trainer_class=Trainer):
    """A RuntimeError naming each of `TRAINER_METHODS_RELIED_ON` that `trainer_class` lacks, and the transformers
    version."""
    missing = [name for name in TRAINER_METHODS_RELIED_ON if not callable(getattr(trainer_class, name, None))]
    if missing:
        raise RuntimeError(
            f"CasanTrainer overrides or calls Trainer.{', Trainer.'.join(missing)}, which transformers "
            f"{transformers.__version__} does not have; casan_hf supports the releases of its pyproject.toml."
        )


def repository_name(args):
    """The run's Hub repository name: --hub_model_id, else the output folder's name (of its absolute path, so that
    `--output_dir .` names the folder the run is in)."""
    return args.hub_model_id or Path(args.output_dir).absolute().name


def stopped_message(step, checkpoint, save_only_model):
    """What a run a signal stopped at `step` says: where it was saved and how to continue."""
    if save_only_model:
        return (
            f"Stopped at step {step} and saved {checkpoint}: it holds the model only (--save_only_model), without "
            "the optimizer's, scheduler's and RNG states; run the same command with --resume_weights_only to "
            "continue from its weights (not to the weights of an unbroken run)."
        )
    return f"Stopped at step {step} and saved {checkpoint}: run the same command to continue from it."


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


def give_context_its_learning_rate(param_groups, model, learning_rate):
    """`param_groups` (an optimizer's) with the parameters CASAN adds (`is_casan_parameter`) of each moved into a
    group of their own after them (same options, weight decay included) at `learning_rate`: new dicts, the groups
    given left as they were. Groups split already come back as they are. The scheduler, built after the optimizer,
    then warms up and decays each group from its own peak."""
    context = {id(p) for name, p in model.named_parameters() if is_casan_parameter(name)}
    if not context:
        raise ValueError("a context learning rate needs a CASAN model with context or an output gate; it has neither.")
    rest, own = [], []
    for group in param_groups:
        options = {key: value for key, value in group.items() if key != "params"}
        params = [p for p in group["params"] if id(p) not in context]
        context_params = [p for p in group["params"] if id(p) in context]
        if params:
            rest.append({**options, "params": params})
        if context_params:
            own.append({**options, "params": context_params, "lr": learning_rate, "initial_lr": learning_rate})
    return rest + own


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


class CasanTrainer(Trainer):
    """A `Trainer` for CASAN runs.

    - `context_learning_rate`: the context parameters' own peak learning rate (None: the base one).
    - `frozen` and `unfreeze_after`: parameters that do not train until optimizer step `unfreeze_after` (never,
      if None). They sit in the optimizer from the start without gradients, which AdamW leaves untouched,
      weight decay included, so that they train on the same schedule once they are let go.
    - `preemption`: the run's `preemption.PreemptionAndResume`, which notes the cluster's signals inside its
      `noting_signals()` (the scripts hold it over the whole run): a signalled run saves the checkpoint of its step
      and raises `preemption.Preempted`. It also tells a data collator with a `resume_at(batches)` method, when a
      run resumes, how many training batches the checkpoint's steps drew: one that draws each batch's randomness
      from (seed, batch index) then gives the resumed run the unbroken one's batches. (Randomness drawn from one
      stream cannot be resumed exactly: the dataloader draws a batch ahead of training, and Trainer restores the
      global RNG only after it has drawn the first batch after the resume.) A run resumed from the checkpoint of
      its last step trains no further.
    - inside `preemption.noting_signals()` (the scripts hold it over the whole run), the checkpoint of the last
      step is kept until the run's end is written (`finish_run`): saved where Trainer's save options would not
      save it (marked `KEPT_FOR_THE_END`), and not deleted by Trainer's end of training under
      `save_total_limit=1`. A signal after the last step (while the best model loads, in the final save or
      evaluation) raises `Preempted`, and the same command finishes the run from that checkpoint without a step;
      `finish_run` then deletes what Trainer's options would not have kept (`release_the_end_checkpoint`).
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
        check_trainer_methods()
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
        self.preemption = PreemptionAndResume(self.accelerator, self.data_collator)
        self.add_callback(self.preemption)
        self.end_checkpoint = None  # the checkpoint of the last step, kept until the run's end is written

    def create_optimizer(self, model=None):
        built = self.optimizer is None
        for parameter in self.frozen:  # in the optimizer, without gradients until they are let go
            parameter.requires_grad_(True)
        try:
            optimizer = super().create_optimizer(model)
        finally:
            for parameter in self.frozen:
                parameter.requires_grad_(False)
        if built and self.context_learning_rate is not None:
            model = self.model if model is None else model
            optimizer.param_groups = give_context_its_learning_rate(
                optimizer.param_groups, model, self.context_learning_rate
            )
        return optimizer

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        """No batch past the last step: a run resumed from the checkpoint of its last step trains no further."""
        if self.preemption.resumed_at_the_end:
            return [], None
        return super().get_batch_samples(epoch_iterator, num_batches, device)

    def _finalize_training(self, trial, *args, **kwargs):
        """Trainer's end of training, after the checkpoint of the step the run ends at is made sure of: saved if it
        does not hold everything done at that step (Trainer's save options may have skipped it). A run a signal
        stopped (`preemption`) then raises `Preempted`, leaving the end (the best model loaded, checkpoints
        deleted) to the resumed run; otherwise the checkpoint is kept until `finish_run` (Trainer would delete it
        under `save_total_limit=1`), and a signal while the best model loads raises `Preempted` after it. Outside
        `preemption.noting_signals()` (a `train()` of the library's user) no signal can come: Trainer's end as it
        is."""
        stopped = self.preemption.stopped_at_the_end(self.args, self.state)
        if not (stopped or self.preemption.noting):  # no signal can come: Trainer's end, as it is
            return super()._finalize_training(trial, *args, **kwargs)
        checkpoint = os.path.join(self.args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        if not (self.preemption.is_saved(self.state) or self.preemption.resumed_at_the_end):
            self._save_checkpoint(self.model_wrapped, trial)
            # As after Trainer's own saves: callbacks that write into a checkpoint (the scripts' RunClock) see it.
            self.control = self.callback_handler.on_save(self.args, self.state, self.control)
            if not stopped and self.args.should_save:
                Path(checkpoint, KEPT_FOR_THE_END).write_text(KEPT_FOR_THE_END_TEXT)
        self.end_checkpoint = checkpoint
        if stopped:
            raise Preempted(stopped_message(self.state.global_step, checkpoint, self.args.save_only_model))
        save_total_limit, self.args.save_total_limit = self.args.save_total_limit, None
        try:
            output = super()._finalize_training(trial, *args, **kwargs)
        finally:
            self.args.save_total_limit = save_total_limit
        output = self.figures_of_the_steps_trained(output, checkpoint)
        self.preemption.raise_if_signalled(checkpoint, "the end of training (the best model's loading)")
        return output

    def figures_of_the_steps_trained(self, output, checkpoint):
        """`output` (Trainer's `TrainOutput`) with the figures of the steps the run trained: kept in `checkpoint`, the
        last step's (`TRAINED_FIGURES`), by the run that trained them; read back from it by a run resumed there,
        whose own are a loss and speeds of 0 over no step (empty where that checkpoint kept none: a run stopped
        inside its last step never reached its end); the log history's record of the training's end likewise."""
        kept = Path(checkpoint, TRAINED_FIGURES)
        if self.preemption.resumed_at_the_end:
            metrics = json.loads(kept.read_text(encoding="utf-8")) if kept.is_file() else {}
            # Trainer's record of the training's end: the trained figures (`train_*`) in place of those over no step
            # (its epoch and floating-point operations are the run's whole count, kept).
            history = self.state.log_history
            at = max(index for index, record in enumerate(history) if "train_runtime" in record)
            over_no_step = {name for name in output.metrics if name.startswith("train_")}
            history[at] = {**{k: v for k, v in history[at].items() if k not in over_no_step}, **metrics}
            return TrainOutput(output.global_step, metrics.get("train_loss"), metrics)
        if self.args.should_save and os.path.isdir(checkpoint):
            kept.write_text(json.dumps(output.metrics), encoding="utf-8")
        return output

    def release_the_end_checkpoint(self):
        """Once the run's end is written: deletes what Trainer's save options would not have kept, the
        checkpoint of the last step if it was saved for the end alone (`KEPT_FOR_THE_END`) and, under
        `save_total_limit=1` with a best model, every checkpoint but the best (Trainer's end of training)."""
        if not self.args.should_save or self.end_checkpoint is None:
            return
        best = self.state.best_model_checkpoint
        delete = [self.end_checkpoint] if os.path.isfile(os.path.join(self.end_checkpoint, KEPT_FOR_THE_END)) else []
        if best is not None and self.args.save_total_limit == 1:
            delete = sort_checkpoints(output_dir=self.args.output_dir, best_model_checkpoint=best)
        for checkpoint in delete:
            if os.path.isdir(checkpoint) and not (best is not None and os.path.samefile(checkpoint, best)):
                logger.info(f"Deleting {checkpoint}, kept until the end of the run.")
                shutil.rmtree(checkpoint, ignore_errors=True)

    def init_hf_repo(self, token=None, private=None):
        """The repository is named here and created by the push, once the folder has passed its checks."""
        self.hub_model_id = repository_name(self.args)

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
        gates = self.gate_monitor.latest if self.gate_monitor else None
        card = self.render_card(
            self.model,
            repository_name(self.args),
            eval_metrics=self.card_eval_metrics,
            gates=gates,
            **self.card_kwargs,
        )
        write_model_card(self.args.output_dir, card)


class CasanSeq2SeqTrainer(CasanTrainer, Seq2SeqTrainer):
    """`CasanTrainer` for sequence-to-sequence models: `Seq2SeqTrainer`'s generation in evaluation and prediction
    (`--predict_with_generate`), with the context's own learning rate and the gate monitor of every CASAN run."""

    render_card = staticmethod(render_translation_card)


def train_and_save(trainer, checkpoint, train_samples):
    """Trains (from `checkpoint`, None: from the start), saves the model and logs and saves the training metrics:
    those of the steps trained, also where the run resumed at its last step and trained none
    (`CasanTrainer.figures_of_the_steps_trained`), so that a finished run's results are never overwritten with 0s.
    With `--push_to_hub` the model is saved by the push at the end of the run, once the card holds the scores
    (`save_model` would push too). Inside `trainer.preemption.noting_signals()` a SIGTERM or SIGUSR1 saves a
    checkpoint at the end of the step it came in and raises `preemption.Preempted`, as it does after the final
    save."""
    train_result = trainer.train(resume_from_checkpoint=checkpoint)
    if not trainer.args.push_to_hub:
        trainer.save_model()  # weights, config with auto_map, code files, tokenizer, training_args.bin
    trainer.preemption.raise_if_signalled(trainer.end_checkpoint, "the final save")
    if not train_result.metrics:
        logger.warning(
            f"Resumed at the last step from {trainer.end_checkpoint}, which kept no training figures (the run stopped "
            "inside that step): train_results.json is not written, and no figure of 0 over no step stands for them."
        )
        return
    metrics = {**train_result.metrics, "train_samples": train_samples}
    trainer.log_metrics("train", metrics)
    trainer.save_metrics("train", metrics)


def finish_run(trainer):
    """How every script's run ends, after its evaluation: `preemption.Preempted` if a signal came during it (the
    same command finishes the run from the checkpoint of the last step); the trainer state saved (its log history
    then holds the final scores and gates); the checkpoint kept for the end released
    (`CasanTrainer.release_the_end_checkpoint`); with `--push_to_hub` the folder uploaded (the push saves the
    model and writes its card first), otherwise the card written beside the model the folder holds (none after an
    evaluation alone)."""
    trainer.preemption.raise_if_signalled(trainer.end_checkpoint, "the final evaluation")
    if trainer.args.do_train:
        trainer.save_state()
        trainer.release_the_end_checkpoint()
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
