"""Runs a training script until a chosen point, then waits there to be killed: the kill-and-resume tests start it
with the script's own command line, SIGKILL it once `marker` exists, and resume with the plain script.

    python tests/interrupted.py <marker> <step|checkpoint> <global_step> scripts/run_glue.py --flag ...

- `step`: inside training step `global_step + 1`, gradients computed, the optimizer not yet stepped;
- `checkpoint`: while checkpoint-<global_step> is being written, after its weights and optimizer and before its
  RNG state and trainer_state.json, leaving the folder half-written.
"""

import pathlib
import runpy
import sys
import time

from transformers import Trainer


def wait_to_be_killed(marker):
    pathlib.Path(marker).write_text("reached\n")
    while True:
        time.sleep(60)


def stop_at(point, global_step, marker):
    if point == "step":
        training_step = Trainer.training_step

        def stopping_training_step(self, *args, **kwargs):
            loss = training_step(self, *args, **kwargs)
            if self.state.global_step == global_step:
                wait_to_be_killed(marker)
            return loss

        Trainer.training_step = stopping_training_step
    elif point == "checkpoint":
        save_rng_state = Trainer._save_rng_state

        def stopping_save_rng_state(self, output_dir):
            if self.state.global_step == global_step:
                wait_to_be_killed(marker)
            return save_rng_state(self, output_dir)

        Trainer._save_rng_state = stopping_save_rng_state
    else:
        raise SystemExit(f"unknown stopping point {point!r}: step or checkpoint")


if __name__ == "__main__":
    marker, point, global_step, script, *args = sys.argv[1:]
    stop_at(point, int(global_step), marker)
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")
