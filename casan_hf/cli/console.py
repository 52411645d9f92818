"""What a training script says to the person who runs it: a short summary of what will run (the model, its context,
the data, the steps, the output folder), one line when it resumes or finds its run finished, the training loss at an
interval that suits the run's length, and where the results went. The full arguments and the model's config go to
the run's folder (`run_start.json`, `config.json`), not to the console."""

import json
import math
import os
import sys
from pathlib import Path

from transformers.trainer import TRAINER_STATE_NAME, TrainerState
from transformers.utils import CONFIG_NAME


# TrainingArguments' default `logging_steps`: the interval of a long run's loss lines.
DEFAULT_LOGGING_STEPS = 500
# About this many loss lines in a run shorter than ten default intervals.
LOSS_LINES = 10


def given_flags(argv):
    """The flags given on a command line (names without their dashes), or the keys of its one .json file."""
    if len(argv) == 1 and argv[0].endswith(".json"):
        return set(json.loads(Path(argv[0]).read_text(encoding="utf-8")))
    return {arg[2:].split("=")[0] for arg in argv if arg.startswith("--")}


def planned_steps(training_args, train_examples):
    """The optimizer steps a training run takes: `--max_steps`, else Trainer's count from the epochs (each process
    draws its share of `train_examples` in batches of the per-device size)."""
    if training_args.max_steps > 0:
        return training_args.max_steps
    per_process = math.ceil(train_examples / training_args.world_size)
    rounded = math.floor if training_args.dataloader_drop_last else math.ceil
    batches = rounded(per_process / training_args.per_device_train_batch_size)
    per_epoch = max(math.ceil(batches / training_args.gradient_accumulation_steps), 1)
    return math.ceil(training_args.num_train_epochs * per_epoch)


def loss_interval(steps):
    """The steps between two loss lines where `--logging_steps` is not given: about `LOSS_LINES` lines in a short
    run, every step in a run of fewer than 2 x `LOSS_LINES` steps, TrainingArguments' 500 in a long one."""
    return min(DEFAULT_LOGGING_STEPS, max(1, steps // LOSS_LINES))


START_OVER = "to train from the start instead, pass --overwrite_output_dir or another --output_dir."


def finished_line(training_args, steps):
    """What a rerun of a finished run says, or None: the run in `--output_dir` ended (its `trainer_state.json`,
    which the end of a run writes there) at `steps` or later, and no `--resume_from_checkpoint` asks for one of
    its checkpoints. Such a rerun does nothing, so nothing of that run is overwritten."""
    output_dir = training_args.output_dir
    path = os.path.join(output_dir, TRAINER_STATE_NAME)
    if training_args.resume_from_checkpoint is not None or not os.path.isfile(path):
        return None
    if TrainerState.load_from_json(path).global_step < steps:
        return None
    return (
        f"{output_dir} holds this run, finished at step {steps}: nothing is left to do. To evaluate it, pass "
        f"--model_name_or_path {output_dir} --do_eval with another --output_dir; {START_OVER}"
    )


def resume_line(checkpoint, steps):
    """What a run that found `checkpoint` in its output folder does: it resumes from it, and how to start over."""
    step = TrainerState.load_from_json(os.path.join(checkpoint, TRAINER_STATE_NAME)).global_step
    return f"Resuming from {checkpoint} (step {step} of {steps}); {START_OVER}"


def count(number, noun):
    """`number` `noun`s, with the thousands separated: "2,490 examples"."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def kept_of(kept, total, noun="examples"):
    """ "64 of 277 examples" for the first examples of a split, "277 examples" for all of it."""
    return f"{kept:,} of {total:,} {noun}" if kept < total else f"{total:,} {noun}"


def model_words(model):
    """The model in a few words: its class, its context (a CASAN model) and its size."""
    context = getattr(model.config, "context_type", None)
    kind = f"{context!r} context" if context is not None else "no context (the baseline)"
    return f"{type(model).__name__}, {kind}, {model.num_parameters() / 1e6:.2f}M parameters"


def training_words(training_args, steps, train_examples):
    """The training in a few words: steps, batch, learning rate, seed, loss interval."""
    processes = training_args.world_size
    accumulation = training_args.gradient_accumulation_steps
    batch = training_args.per_device_train_batch_size * processes * accumulation
    epochs = steps * batch / train_examples
    interval = int(training_args.logging_steps)
    return (
        f"{count(steps, 'step')} of {batch} examples ({epochs:.2g} epoch{'' if epochs == 1 else 's'}, "
        f"{count(processes, 'process')} on "
        f"{training_args.device.type}), learning rate {training_args.learning_rate:g}, seed {training_args.seed}, "
        f"loss every {'step' if interval == 1 else count(interval, 'step')}"
    )


def summary(script, rows):
    """The lines a run starts with: `script` and what it will do, then each `(label, text)` of `rows`."""
    width = max(len(label) for label, _ in rows)
    return "\n".join([f"{script}:", *(f"  {label:<{width}}  {text}" for label, text in rows)])


def announce_run(logger, script, rows, training_args, train_dataset, checkpoint):
    """Logs to `logger` the summary `script` starts with (`rows`, then, where it trains on `train_dataset`, None
    where it does not, its steps, then the output folder) and, where it resumes from `checkpoint`, the one line that
    says from which or that its run is finished. Without `--logging_steps` on the command line, sets the loss interval
    to suit the run's length. Returns whether the run is finished already: the script then does nothing."""
    rows = list(rows)
    if training_args.do_train:
        steps = planned_steps(training_args, len(train_dataset))
        if "logging_steps" not in given_flags(sys.argv[1:]):
            training_args.logging_steps = loss_interval(steps)
        rows.append(("training", training_words(training_args, steps, len(train_dataset))))
    rows.append(("output", f"{training_args.output_dir} (every argument: run_start.json)"))
    logger.info(summary(script, rows))
    if checkpoint is None or not training_args.do_train:  # without --do_train nothing resumes
        return False
    finished = finished_line(training_args, steps)
    logger.warning(finished or resume_line(checkpoint, steps))
    return finished is not None


def saved_line(script, output_dir):
    """Where a run's results went: what its output folder holds."""
    folder = Path(output_dir)
    held = [
        what
        for name, what in (
            (CONFIG_NAME, "the model"),
            ("README.md", "its card (README.md)"),
            ("eval_results.json", "the scores (eval_results.json)"),
            ("run_start.json", "the full arguments (run_start.json)"),
        )
        if (folder / name).is_file()
    ]
    return f"{script}: done; {output_dir} holds {', '.join(held) or 'nothing'}."
