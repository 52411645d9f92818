"""Preemption and resume, in one callback (`PreemptionAndResume`, held by every `CasanTrainer`).

Preemption: a run told to stop by the cluster (SIGTERM, or SIGUSR1, which SLURM's `--signal` sends ahead of its
time limit) saves a checkpoint at the end of the training step it is in and raises `Preempted`, which the scripts
turn into `PREEMPTED_EXIT_CODE`. Running the same command again resumes from that checkpoint
(`cli.resume.find_checkpoint`) to the weights of an unbroken run. A signal after the last step (while the best
model loads, in the final save or evaluation) raises `Preempted` too: the checkpoint of the last step is kept until
the run's end is written (`CasanTrainer`), and the same command resumes from it without training a step.

Resume: a run resumed from a checkpoint draws the batches the unbroken run drew (a collator with `resume_at` is
told how many that run had drawn, by Trainer's own epoch arithmetic), and one resumed from the checkpoint of its
last step trains no further and does not end that epoch again.

The signal check costs an unsignalled run nothing in one process: it reads a Python flag. In several, the processes
vote at the end of every step (`StopVote`: an asynchronous all-reduce of one integer over a CPU group, read at the
end of the next step, when it has long arrived: no device sync, no wait on the others), so every process stops at
the same step, at most one step after the one the signal came in, whatever the logging interval; they are also
asked at once (accelerate's trigger) at the steps where Trainer logs, evaluates or saves, which read the loss on the
host already, at epoch ends and once after the last step. docs/RESUME.md states the bound and the vote's host
cost.
"""

import contextlib
import logging
import signal

import torch
import torch.distributed as dist
from transformers import TrainerCallback


logger = logging.getLogger(__name__)

# The signals a cluster sends before it stops a job: SIGTERM (Kubernetes, SLURM at the time limit, torchrun passing
# on its own) and SIGUSR1 (SLURM's `--signal=USR1@<seconds>`).
PREEMPTION_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
# EX_TEMPFAIL of sysexits.h: "a temporary failure; the user is invited to retry". Not 1 (an error) or 2 (bad usage).
PREEMPTED_EXIT_CODE = 75


class Preempted(Exception):
    """A signal stopped the run; the message says where it was saved and how to continue. The scripts exit with
    `PREEMPTED_EXIT_CODE`."""


def batches_drawn(global_step, batches_per_epoch, accumulation_steps, skips_data=True):
    """How many training batches an unbroken run has drawn before the step after `global_step`, as Trainer counts
    them when it resumes (`set_initial_training_values`, `_init_training_state`): an epoch of `batches_per_epoch`
    batches makes ceil(batches_per_epoch / accumulation_steps) optimizer steps, the last one short; the resumed
    epoch skips `accumulation_steps` batches for each of its steps done (none with `--ignore_data_skip`)."""
    steps_per_epoch = max(-(-batches_per_epoch // accumulation_steps), 1)
    epochs, steps = divmod(global_step, steps_per_epoch)
    return epochs * batches_per_epoch + (steps * accumulation_steps if skips_data else 0)


class StopVote:
    """The processes' vote on stopping, one a step: each casts whether it has noted a signal at the end of a step
    (an all-reduce of one integer, asynchronous, over a gloo group: the default one, or a CPU group beside NCCL's),
    and reads the sum at the end of the next step, so no process waits on another or on its device. Every process
    reads the same sum at the same step."""

    def __init__(self):
        self.group = None if dist.get_backend() == "gloo" else dist.new_group(backend="gloo")
        self.votes = None
        self.pending = None

    def cast(self, signalled):
        self.votes = torch.tensor([int(signalled)])
        self.pending = dist.all_reduce(self.votes, group=self.group, async_op=True)

    def result(self):
        """Whether the vote cast last found a signal in some process (False where none is pending)."""
        if self.pending is None:
            return False
        self.pending.wait()
        self.pending = None
        return bool(self.votes.item())


class PreemptionAndResume(TrainerCallback):
    """Inside `noting_signals()`, a SIGTERM or SIGUSR1 is noted, not acted on at once; at the end of the optimizer
    step it arrived in (in several processes, of that step where Trainer logs, evaluates or saves there, else of the
    step after it: `StopVote`), training stops in every process of the run (`accelerator`): `stopped_at` is that
    step and `signal_name` the signal.
    `CasanTrainer` then saves Trainer's checkpoint of that step at the end of training, unless Trainer's own save
    options saved it with everything done at that step (`is_saved`). `collator`, if it has `resume_at(batches)`,
    is told at the start of training how many batches the steps done drew (`batches_drawn`)."""

    def __init__(self, accelerator, collator=None):
        self.accelerator = accelerator
        self.collator = collator
        self.signal_name = None
        self.stopped_at = None
        self.resumed_at_the_end = False
        self.noting = False  # inside noting_signals(): a signal may still come while the run's end is written
        self.saved_step = None  # the step of the last checkpoint, while nothing has been logged or evaluated since
        self.vote = None  # several processes: their vote on stopping, cast at every step's end

    def note_signal(self, signum, frame):
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name

    @contextlib.contextmanager
    def noting_signals(self):
        """The preemption signals noted while it lasts; the handlers found are back afterwards, also after an
        error."""
        found = {signum: signal.signal(signum, self.note_signal) for signum in PREEMPTION_SIGNALS}
        self.noting = True
        try:
            yield self
        finally:
            self.noting = False
            for signum, handler in found.items():
                signal.signal(signum, handler)

    def signalled(self):
        """Whether a process of the run has noted a signal. Every process must ask at the same point: in several
        processes the answer is summed over them (one all-reduce); in one it is this process's flag."""
        if self.accelerator.num_processes == 1:
            return self.signal_name is not None
        if self.signal_name is not None:
            self.accelerator.set_trigger()
        return self.accelerator.check_trigger()

    def stops(self, args, state, signalled=None):
        """Whether the run stops at this step (`signalled`, unless given); if so, says so and notes the step."""
        if not (self.signalled() if signalled is None else signalled):
            return False
        self.stopped_at = state.global_step
        received = f"received {self.signal_name}" if self.signal_name else "another process received a signal"
        logger.warning(f"Process {args.process_index}: {received}; saving step {state.global_step} and stopping.")
        return True

    def asks_here(self, control):
        """Whether this step end is one where the processes are asked at once (besides their vote): every step in
        one process; in several, the steps where Trainer logs, evaluates or saves (`DefaultFlowCallback` has set
        `control`), which read the loss on the host already. The end of training asks them all
        (`stopped_at_the_end`)."""
        return (
            self.accelerator.num_processes == 1 or control.should_log or control.should_evaluate or control.should_save
        )

    def voted_to_stop(self):
        """In several processes, at a step's end: the vote cast at the last step's end, and this step's cast."""
        stop = self.vote.result()
        if not stop:
            self.vote.cast(self.signal_name is not None)
        return stop

    def on_train_begin(self, args, state, control, train_dataloader=None, **kwargs):
        self.stopped_at = None
        several = self.accelerator.num_processes > 1 and dist.is_available() and dist.is_initialized()
        self.vote = StopVote() if several else None
        self.resumed_at_the_end = state.global_step >= state.max_steps
        if hasattr(self.collator, "resume_at") and train_dataloader is not None:
            self.collator.resume_at(
                batches_drawn(
                    state.global_step,
                    len(train_dataloader),
                    args.gradient_accumulation_steps,
                    not args.ignore_data_skip,
                )
            )

    def on_step_end(self, args, state, control, **kwargs):
        voted = self.vote is not None and self.voted_to_stop()
        if self.stops(args, state, True) if voted else self.asks_here(control) and self.stops(args, state):
            control.should_training_stop = True

    def on_epoch_end(self, args, state, control, **kwargs):
        """An epoch cut short by the stop is not over: its end-of-epoch evaluation, log and save come when the
        resumed run ends it. The last step (`max_steps`) ends its epoch in any run, once: a run resumed from the
        checkpoint of its last step does not end it again. In several processes the end of an epoch before the
        last step is a point where they are asked."""
        ended = float(state.epoch).is_integer() or state.global_step >= state.max_steps
        if self.resumed_at_the_end or (self.stopped_at is not None and not ended):
            control.should_evaluate = control.should_log = control.should_save = False
        elif self.accelerator.num_processes > 1 and state.global_step < state.max_steps and self.stops(args, state):
            control.should_training_stop = True

    def on_save(self, args, state, control, **kwargs):
        self.saved_step = state.global_step

    def on_log(self, args, state, control, **kwargs):
        self.saved_step = None

    on_evaluate = on_log

    def is_saved(self, state):
        """Whether the checkpoint of the current step holds all that the run has done (nothing was logged or
        evaluated after it was saved)."""
        return self.saved_step == state.global_step

    def stopped_at_the_end(self, args, state):
        """At the end of training, in every process: whether the run stopped, at a step's end or now, for a signal
        that came after the last step's end."""
        voted = self.vote is not None and self.vote.result()  # the last step's vote, drained in every process
        return self.stopped_at is not None or self.stops(args, state, True if voted else None)

    def raise_if_signalled(self, checkpoint, what):
        """After `what` (a part of the run's end), in every process: `Preempted` if a process has noted a signal;
        the same command continues from `checkpoint` (None: the run is redone; nothing had been saved)."""
        if not self.signalled():
            return
        received = self.signal_name or "a signal (another process)"
        continuing = f"run the same command to finish from {checkpoint}" if checkpoint else "run the same command"
        raise Preempted(f"Received {received} during {what}: {continuing}.")
