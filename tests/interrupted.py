"""Runs a training script until a chosen point, then waits there or signals itself: the kill-and-resume tests start
it with the script's own command line (alone, or in each process of torchrun), kill or signal it once `marker`
exists, and resume with the plain script.

    python tests/interrupted.py <marker> <point>[@<rank>] <global_step> scripts/run_glue.py ...

- `step`: inside training step `global_step + 1`, gradients computed, the optimizer not yet stepped; waits to be
  killed;
- `checkpoint`: while checkpoint-<global_step> is being written, after its weights and optimizer and before its
  RNG state and trainer_state.json, leaving the folder half-written; waits to be killed;
- `signal`: where `step` stops, waits for a SIGTERM or SIGUSR1, then carries on (the script's own handlers see it);
- `sigterm`: where `step` stops, sends itself a SIGTERM and carries on;
- `sigterm-in-evaluation`: as the evaluation at `global_step` inside training starts, sends itself a SIGTERM and
  carries on;
- `sigterm-in-best-model`, `sigterm-in-final-save`, `sigterm-in-final-evaluation`: after training, at step
  `global_step`, as Trainer starts loading the best model, as the script's final save starts, or as its final
  evaluation starts: sends itself a SIGTERM and carries on.

The tests that run a script in their own process replace the same method (`stopping`) for the run.

With `@<rank>`, only the process of that rank (torchrun's RANK) stops; the others run on until they wait for it.
The marker holds the process id of the process that stopped.
"""

import os
import pathlib
import runpy
import signal
import sys
import time

from transformers import Trainer


def reach(marker):
    pathlib.Path(marker).write_text(f"{os.getpid()}\n")


def wait_to_be_killed(marker):
    reach(marker)
    while True:
        time.sleep(60)


def wait_for_a_signal(marker):
    """Reaches the marker, then waits until a SIGTERM or SIGUSR1 has come, and passes it on to the handlers the
    script installed."""
    received = []
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGUSR1)}

    def note(signum, frame):
        received.append(signum)
        handlers[signum](signum, frame)

    for signum in handlers:
        signal.signal(signum, note)
    reach(marker)
    while not received:
        time.sleep(0.05)
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def signal_itself(marker):
    reach(marker)
    os.kill(os.getpid(), signal.SIGTERM)


def stopping(point, global_step, marker):
    """(the name of the `Trainer` method that reaches `point`, its replacement that stops there after
    `global_step`)."""
    if point in ("step", "signal", "sigterm"):
        training_step = Trainer.training_step
        wait = {"step": wait_to_be_killed, "signal": wait_for_a_signal, "sigterm": signal_itself}[point]

        def stopping_training_step(self, *args, **kwargs):
            loss = training_step(self, *args, **kwargs)
            if self.state.global_step == global_step:
                wait(marker)
            return loss

        return "training_step", stopping_training_step
    if point == "checkpoint":
        save_rng_state = Trainer._save_rng_state

        def stopping_save_rng_state(self, output_dir):
            if self.state.global_step == global_step:
                wait_to_be_killed(marker)
            return save_rng_state(self, output_dir)

        return "_save_rng_state", stopping_save_rng_state
    if point == "sigterm-in-evaluation":
        evaluate = Trainer.evaluate

        def signalled_evaluate(self, *args, **kwargs):
            if self.is_in_train and self.state.global_step == global_step:
                signal_itself(marker)
            return evaluate(self, *args, **kwargs)

        return "evaluate", signalled_evaluate
    after_training = {
        "sigterm-in-best-model": "_load_best_model",
        "sigterm-in-final-save": "save_model",
        "sigterm-in-final-evaluation": "evaluate",
    }
    if point in after_training:
        name = after_training[point]
        method = getattr(Trainer, name)

        def signalled_after_training(self, *args, **kwargs):
            final = not self.is_in_train or name == "_load_best_model"
            if final and not kwargs.get("_internal_call") and self.state.global_step == global_step:
                signal_itself(marker)
            return method(self, *args, **kwargs)

        return name, signalled_after_training
    raise SystemExit(
        f"unknown stopping point {point!r}: step, checkpoint, signal, sigterm, sigterm-in-evaluation, "
        f"{', '.join(after_training)}"
    )


if __name__ == "__main__":
    marker, where, global_step, script, *args = sys.argv[1:]
    point, _, rank = where.partition("@")
    if not rank or rank == os.environ.get("RANK", "0"):
        setattr(Trainer, *stopping(point, int(global_step), marker))
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")
