"""Resuming a run from the last complete checkpoint of its output folder, or refusing a folder that holds other
files (nothing the user had is overwritten)."""

import json
import logging
import os
import re
from pathlib import Path

from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..hub import check_output_dir
from ..hub.folder import RUN_START_NAME
from ..options import OPTIONS


logger = logging.getLogger(__name__)


def checkpoint_problem(folder, processes=1):
    """Why a checkpoint folder cannot be resumed from by a run of `processes` processes, or None. Trainer writes
    trainer_state.json last, so a folder left half-written by a kill lacks it or holds it cut short; resuming from
    such a folder would restart at step 0 from its weights without a word. In a run of several processes each
    saves its own RNG state (rng_state_<rank>.pth), and the first writes trainer_state.json without waiting for the
    others: a process killed while saving leaves a folder that lacks only its RNG state, from which transformers
    resumes to other weights, saying so only at the info level."""
    path = os.path.join(folder, TRAINER_STATE_NAME)
    if not os.path.isfile(path):
        return f"it has no {TRAINER_STATE_NAME} (written last: the run stopped while saving it)"
    try:
        with open(path, encoding="utf-8") as handle:
            json.load(handle)
    except ValueError:
        return f"its {TRAINER_STATE_NAME} is cut short"
    rng_saved = [os.path.isfile(os.path.join(folder, f"rng_state_{rank}.pth")) for rank in range(processes)]
    if processes > 1 and any(rng_saved) and not all(rng_saved):  # none: a checkpoint of the model only
        rank = rng_saved.index(False)
        return f"it has no RNG state of process {rank}, rng_state_{rank}.pth (that process stopped while saving it)"
    return None


def holds_the_model_only(folder):
    """Whether a checkpoint folder was saved with `--save_only_model`: no optimizer, scheduler or RNG state."""
    states = ("optimizer.pt", "scheduler.pt", "rng_state.pth", "rng_state_0.pth")
    return not any(os.path.exists(os.path.join(folder, name)) for name in states)


def check_resumable(checkpoint, weights_only):
    """A ValueError for a checkpoint of the model only, unless `weights_only` (--resume_weights_only): Trainer
    would resume from it without a word with a fresh optimizer and the schedule back at its start."""
    if holds_the_model_only(checkpoint) and not weights_only:
        raise ValueError(
            f"{checkpoint} holds the model only (saved with --save_only_model): without the optimizer's, "
            "scheduler's and RNG states a run resumed from it starts a fresh optimizer and the learning-rate "
            "schedule at step 0, and does not continue the run. Pass --resume_weights_only to continue from its "
            "weights so, or --overwrite_output_dir to train from scratch."
        )


# The arguments a resumed run must share with the run it resumes, any script's: what shapes the model (every CASAN
# option, what it starts from, a new translation model's sizes and vocabulary) or its optimizer, its learning rates
# and the batches each step draws. Any other change (more steps, another evaluation, logging or save interval) is
# said in one line; run_start.json records every argument of each resume.
SHAPING_ARGUMENTS = (
    *(option.name for option in OPTIONS),
    *("model_name_or_path", "tokenizer_name", "model_size", "d_model", "encoder_layers", "decoder_layers"),
    *("attention_heads", "ffn_dim", "dropout", "vocab_size", "context_learning_rate", "learning_rate"),
    *("weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "optim", "lr_scheduler_type", "warmup_ratio"),
    *("warmup_steps", "max_grad_norm", "seed", "gradient_accumulation_steps", "per_device_train_batch_size"),
)


def flat_arguments(arguments):
    """`{name: value}` of a run's arguments by group (`run_start.run_arguments`), as run_start.json holds them."""
    return {name: value for group in arguments.values() for name, value in group.items()}


def check_resumed_arguments(checkpoint, arguments):
    """A ValueError, in one line, where `arguments` (`run_start.run_arguments` of this run) give a `SHAPING_ARGUMENTS`
    value other than the run that saved `checkpoint` last started with (its folder's run_start.json; nothing to
    compare without one); a warning naming every other change. Each names the option, its old and new value."""
    record = Path(checkpoint).parent / RUN_START_NAME
    if not record.is_file():
        return
    started = json.loads(record.read_text(encoding="utf-8"))
    before = flat_arguments((started.get("resumes") or [started])[-1].get("arguments") or {})
    now = flat_arguments(json.loads(json.dumps(arguments, default=str)))
    changed = {name: (before[name], now[name]) for name in now if name in before and before[name] != now[name]}
    shaping = {name: values for name, values in changed.items() if name in SHAPING_ARGUMENTS}
    if shaping:
        raise ValueError(
            f"{checkpoint} was trained with other options than this run's: {_changes(shaping)}; resume with the old "
            "values, or pass --overwrite_output_dir to train from scratch."
        )
    if changed:
        logger.warning(
            f"Resuming {checkpoint} with changed settings the checkpoint does not depend on: {_changes(changed)}."
        )


def _changes(changed):
    return ", ".join(f"{name} {old!r} -> {new!r}" for name, (old, new) in changed.items())


def last_complete_checkpoint(output_dir, processes=1):
    """The `checkpoint-<step>` folder of `output_dir` with the highest step that is complete for a run of
    `processes` processes, and the incomplete ones above it (newest first); Trainer writes over those when it
    reaches their step again."""
    steps = {}
    for name in os.listdir(output_dir):
        match = re.fullmatch(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)", name)
        if match and os.path.isdir(os.path.join(output_dir, name)):
            steps[int(match.group(1))] = os.path.join(output_dir, name)
    incomplete = []
    for step in sorted(steps, reverse=True):
        problem = checkpoint_problem(steps[step], processes)
        if problem is None:
            return steps[step], incomplete
        incomplete.append((steps[step], problem))
    return None, incomplete


def find_checkpoint(training_args, overwrite_output_dir, weights_only=False, arguments=None):
    """transformers' run_glue rule: resume from the last checkpoint in --output_dir, refuse other leftovers. A
    checkpoint that a kill left half-written is never resumed from: the last complete one is, with a warning. A
    checkpoint of the model only is refused unless `weights_only` (`check_resumable`), and one trained with other
    options than the run's `arguments` (`run_start.run_arguments`) is refused (`check_resumed_arguments`)."""
    if training_args.resume_from_checkpoint is not None:
        checkpoint = training_args.resume_from_checkpoint
        if not os.path.isdir(checkpoint):
            raise ValueError(f"--resume_from_checkpoint {checkpoint!r} is not a folder.")
        problem = checkpoint_problem(checkpoint, training_args.world_size)
        if problem is not None:
            raise ValueError(f"--resume_from_checkpoint {checkpoint!r} is incomplete: {problem}.")
        check_resumable(checkpoint, weights_only)
        check_resumed_arguments(checkpoint, arguments or {})
        return checkpoint
    output_dir = training_args.output_dir
    last_checkpoint, incomplete = None, []
    if os.path.isdir(output_dir) and training_args.do_train and not overwrite_output_dir:
        last_checkpoint, incomplete = last_complete_checkpoint(output_dir, training_args.world_size)
    if last_checkpoint is None and incomplete:
        names = ", ".join(f"{folder} ({problem})" for folder, problem in incomplete)
        raise ValueError(
            f"Output folder {output_dir!r} holds only incomplete checkpoints: {names}. Pass "
            "--overwrite_output_dir to train from scratch."
        )
    if last_checkpoint is None:
        check_output_dir(output_dir, overwrite_output_dir, flag="--overwrite_output_dir")
        return None
    check_resumable(last_checkpoint, weights_only)
    check_resumed_arguments(last_checkpoint, arguments or {})
    for folder, problem in incomplete:
        logger.warning(f"{folder} is incomplete ({problem}): resuming from {last_checkpoint} instead.")
    return last_checkpoint  # the scripts say what they do with it (`console.resume_line`)
