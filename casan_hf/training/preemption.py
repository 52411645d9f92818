"""Preemption: a run told to stop by the cluster (SIGTERM, or SIGUSR1, which SLURM's `--signal` sends ahead of its
time limit) saves a checkpoint at the end of the training step it is in, and exits with `PREEMPTED_EXIT_CODE`.
Running the same command again resumes from that checkpoint (`cli.resume.find_checkpoint`) to the weights of an
unbroken run.

Everything is transformers' and accelerate's own: a `TrainerCallback` asks for the save and the stop through
`TrainerControl`, and Trainer writes its usual checkpoint (`CasanTrainer` writes it where Trainer's own save
options would not, and skips Trainer's end of training, which could delete it). In a run of several processes the
signal may reach them at different steps (or reach one alone): at the end of every optimizer step each process
adds its flag to accelerate's trigger (`Accelerator.set_trigger`), which `Accelerator.check_trigger` sums over all
of them, so that every process stops at the same step and saves the same checkpoint.
"""

import contextlib
import logging
import os
import signal
import sys

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR


logger = logging.getLogger(__name__)

# The signals a cluster sends before it stops a job: SIGTERM (Kubernetes, SLURM at the time limit, torchrun passing
# on its own) and SIGUSR1 (SLURM's `--signal=USR1@<seconds>`).
PREEMPTION_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
# EX_TEMPFAIL of sysexits.h: "a temporary failure; the user is invited to retry". Not 1 (an error) or 2 (bad usage).
PREEMPTED_EXIT_CODE = 75


class SaveAndStopOnSignal(TrainerCallback):
    """Inside `noting_signals()`, a SIGTERM or SIGUSR1 is noted, not acted on at once; at the end of the optimizer
    step it arrived in, every process of the run (`accelerator`) saves Trainer's checkpoint of that step and
    training stops. `stopped_at` is then that step, and `signal_name` the signal.

    `CasanTrainer` holds one (`preemption`) and asks it at the end of training (`stop_at_the_end`): a signal that
    came after the last step's end (in its evaluation or save) stops the run there, and a stopped run skips
    Trainer's end of training (loading the best model, deleting the checkpoints beyond `save_total_limit` but the
    best), after making sure that the checkpoint of its step holds everything done at that step (`is_saved`):
    Trainer's own save decision (`--save_strategy best` saves a new best only) may have skipped it."""

    def __init__(self, accelerator):
        self.accelerator = accelerator
        self.signal_name = None
        self.stopped_at = None
        self.saved_step = None  # the step of the last checkpoint, while nothing has been logged or evaluated since

    def note_signal(self, signum, frame):
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name

    @contextlib.contextmanager
    def noting_signals(self):
        """The preemption signals noted while it lasts; the handlers found are back afterwards, also after an
        error."""
        found = {signum: signal.signal(signum, self.note_signal) for signum in PREEMPTION_SIGNALS}
        try:
            yield self
        finally:
            for signum, handler in found.items():
                signal.signal(signum, handler)

    def stops(self, args, state):
        """Whether a process of the run has noted a signal (every process asks at the same point: the answer is
        summed over them); the run then stops at this step."""
        if self.signal_name is not None:
            self.accelerator.set_trigger()
        if not self.accelerator.check_trigger():
            return False
        self.stopped_at = state.global_step
        received = f"received {self.signal_name}" if self.signal_name else "another process received a signal"
        logger.warning(f"Process {args.process_index}: {received}; saving step {state.global_step} and stopping.")
        return True

    def on_step_end(self, args, state, control, **kwargs):
        if self.stops(args, state):
            control.should_save = True
            control.should_training_stop = True

    def on_epoch_end(self, args, state, control, **kwargs):
        """An epoch cut short by the stop is not over: its end-of-epoch evaluation, log and save come when the
        resumed run ends it. The last step (`max_steps`) ends its epoch in any run."""
        ended = float(state.epoch).is_integer() or state.global_step >= state.max_steps
        if self.stopped_at is not None and not ended:
            control.should_evaluate = control.should_log = control.should_save = False

    def on_save(self, args, state, control, **kwargs):
        self.saved_step = state.global_step

    def on_log(self, args, state, control, **kwargs):
        self.saved_step = None

    on_evaluate = on_log

    def stop_at_the_end(self, args, state):
        """At the end of training, in every process: whether the run stopped, at a step's end or now, for a signal
        that came after the last step's end."""
        return self.stopped_at is not None or self.stops(args, state)

    def is_saved(self, state):
        """Whether the checkpoint of the current step holds all that the run has done (nothing was logged or
        evaluated after it was saved)."""
        return self.saved_step == state.global_step


def exit_if_preempted(trainer):
    """After `trainer.train()` (a `CasanTrainer`): if a signal stopped it (`trainer.preemption`), says where the run
    was saved and how to continue, and exits with `PREEMPTED_EXIT_CODE`, before anything else of the run (final
    save, evaluation, model card) is done."""
    stopped_at = trainer.preemption.stopped_at
    if stopped_at is None:
        return
    checkpoint = os.path.join(trainer.args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{stopped_at}")
    if trainer.args.save_only_model:
        continuing = (
            "it holds the model only (--save_only_model), without the optimizer's state, so a run resumed from it "
            "does not continue to the weights of an unbroken run"
        )
    else:
        continuing = "run the same command to continue from it"
    if trainer.is_world_process_zero():
        logger.warning(f"Stopped at step {stopped_at} and saved {checkpoint}: {continuing}.")
    sys.exit(PREEMPTED_EXIT_CODE)
