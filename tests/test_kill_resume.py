"""Kill and resume, to the bit: run_glue.py, run_mlm.py and run_translation.py on tiny models, killed with SIGKILL
after a checkpoint (inside the next training step, or while the next checkpoint is half-written), or preempted with
SIGTERM or SIGUSR1 (a checkpoint of the step the signal came in, exit code 75), resumed with the same command, end
with the weights, metrics, GateMonitor log, optimizer state and the context learning rate's param groups of an
uninterrupted run of the same seed, bit for bit on the CPU. The same faults in turn in one run of two gloo
processes under torchrun: a rank killed, the whole job killed while it writes a checkpoint, a rank signalled. And
run_glue, in this process, signalled under each of Trainer's save options (best with save_total_limit 1 and
load_best_model_at_end, no, epoch), in a step, the last step and the last evaluation: the checkpoint each stop names
exists, the next run resumes from it, and the last run ends as the unbroken one."""

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest
import torch
from conftest import load_script
from glue_helpers import TINY_RUN, make_tiny_bert, read_json
from interrupted import stopping
from safetensors.torch import load_file
from test_shared_folder import pickled_files
from transformers import Trainer, TrainingArguments

from casan_hf.cli.resume import checkpoint_problem, find_checkpoint
from casan_hf.cli.run_start import RUN_TIME_NAME
from casan_hf.training import PREEMPTED_EXIT_CODE


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTERRUPTED = os.path.join(REPO_ROOT, "tests", "interrupted.py")
ENV = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", OMP_NUM_THREADS="1")

# What differs between two runs of the same seed by the clock alone.
CLOCK = ("_runtime", "_per_second")


def script(name):
    return os.path.join(REPO_ROOT, "scripts", f"{name}.py")


def run(command, cwd, timeout=300):
    result = subprocess.run(command, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result


def stopped(command, cwd, point, global_step, timeout=300):
    """Starts `command` (a launcher, a script and its arguments) through tests/interrupted.py and waits until it
    stops at `point` after `global_step`: returns the process, the id of the process that stopped, and the file its
    output goes to."""
    marker = cwd / f"reached-{point}-{global_step}"
    log_path = cwd / f"stopped-{point}-{global_step}.log"
    at_script = next(index for index, arg in enumerate(command) if str(arg).endswith(".py"))
    interrupted = [INTERRUPTED, str(marker), point, str(global_step)]
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [*command[:at_script], *interrupted, *map(str, command[at_script:])],
            cwd=cwd,
            env=ENV,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + timeout
    while not (marker.exists() and marker.read_text().endswith("\n")):
        if process.poll() is not None or time.monotonic() > deadline:
            kill_all(process)
            raise AssertionError(f"never reached {point} {global_step}:\n{log_path.read_text()[-4000:]}")
        time.sleep(0.1)
    return process, int(marker.read_text()), log_path


def kill_all(process):
    """SIGKILLs `process` and every process it started (torchrun starts each worker in a session of its own, out
    of its process group), as a cluster stops a job; returns its exit code."""
    for started in [*psutil.Process(process.pid).children(recursive=True), process]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(started.pid, signal.SIGKILL)
    return process.wait()


def killed(command, cwd, point, global_step):
    """`command` stopped at `point` after `global_step`, then SIGKILLed with every process it started; returns
    what it printed."""
    process, _, log_path = stopped(command, cwd, point, global_step)
    assert kill_all(process) == -signal.SIGKILL
    return log_path.read_text()


def finished(process, log_path, timeout=300):
    """The exit code of `process` and its output, once it has ended (killed with all it started if it has not
    within `timeout` seconds)."""
    try:
        return process.wait(timeout=timeout), log_path.read_text()
    except subprocess.TimeoutExpired:
        kill_all(process)
        raise


def steady(record):
    """A log or metrics record without what only the clock sets."""
    return {name: value for name, value in record.items() if not name.endswith(CLOCK)}


def final_state(output_dir, last_checkpoint=None):
    """What a finished run leaves that must not depend on an interruption (with the optimizer and scheduler of its
    `last_checkpoint`, where it names one)."""
    state = read_json(output_dir / "trainer_state.json")
    final = {
        "weights": load_file(output_dir / "model.safetensors"),
        "log_history": [steady(record) for record in state["log_history"]],
        "global_step": state["global_step"],
        "eval_results": steady(read_json(output_dir / "eval_results.json")),
    }
    if last_checkpoint is None:
        return final
    optimizer = torch.load(output_dir / last_checkpoint / "optimizer.pt", weights_only=True)
    return {
        **final,
        "param_groups": optimizer["param_groups"],
        "optimizer_state": optimizer["state"],
        "scheduler": torch.load(output_dir / last_checkpoint / "scheduler.pt", weights_only=True),
    }


def assert_same_run(resumed, uninterrupted):
    """Every part of `resumed` (a `final_state`) equal to the uninterrupted run's."""
    assert resumed["weights"].keys() == uninterrupted["weights"].keys()
    for name, tensor in uninterrupted["weights"].items():
        assert torch.equal(resumed["weights"][name], tensor), name
    for name, state in resumed.get("optimizer_state", {}).items():
        for key, tensor in state.items():
            assert torch.equal(uninterrupted["optimizer_state"][name][key], tensor), (name, key)
    for name in resumed.keys() - {"weights", "optimizer_state"}:
        assert resumed[name] == uninterrupted[name], name


def gate_records(log_history):
    return [record for record in log_history if any(name.startswith("gates/") for name in record)]


def train_loss_free(state):
    """transformers' resumed `train_loss` averages the steps after the resume only; every step's own loss is in
    the log history and is compared there."""
    history = [{k: v for k, v in record.items() if k != "train_loss"} for record in state["log_history"]]
    return {**state, "log_history": history}


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory, minilm_path):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), minilm_path)


# Each run: six steps, a checkpoint and an evaluation (with the gate means) every two, dropout on; the encoders'
# context at a learning rate of its own.
EVERY_TWO = ["--max_steps", "6", "--save_strategy", "steps", "--save_steps", "2", "--eval_strategy", "steps",
             "--eval_steps", "2", "--do_train", "--do_eval", "--report_to", "none", "--logging_steps", "1",
             "--dataloader_pin_memory", "False", "--seed", "7"]  # fmt: skip
CONTEXT_RATE = ["--learning_rate", "1e-4", "--context_learning_rate", "1e-3"]


def command(name, output_dir, tiny_bert, glue_dir, text_file, multi30k_dir):
    if name == "run_glue":
        data = ["--model_name_or_path", tiny_bert, "--context_type", "deep_global", "--task_name", "sst2",
                "--glue_dir", glue_dir, *TINY_RUN, "--max_train_samples", "64", *CONTEXT_RATE]  # fmt: skip
    elif name == "run_mlm":
        data = ["--model_name_or_path", tiny_bert, "--context_type", "global", "--train_file", text_file,
                "--max_seq_length", "32", "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "8",
                "--validation_split_percentage", "25", *CONTEXT_RATE]  # fmt: skip
    else:
        data = ["--data_dir", multi30k_dir, "--source_lang", "en", "--target_lang", "de", "--context_type", "global",
                "--d_model", "32", "--encoder_layers", "2", "--decoder_layers", "2", "--attention_heads", "4",
                "--ffn_dim", "64", "--vocab_size", "300", "--per_device_train_batch_size", "8",
                "--per_device_eval_batch_size", "8", "--num_beams", "2",
                "--max_target_length", "16", "--max_eval_samples", "8", "--predict_with_generate",
                "--learning_rate", "1e-3", "--disable_tqdm", "true"]  # fmt: skip
    return [sys.executable, script(name), *map(str, data), *EVERY_TWO, "--output_dir", str(output_dir)]


SCRIPTS = ("run_glue", "run_mlm", "run_translation")
# Where each script's run is killed, one kill after another, each run started with the same command: inside step 3,
# after checkpoint-2; for run_glue then also while checkpoint-4 is being written (after its weights), in the run that
# resumed from checkpoint-2.
KILL_POINTS = {name: [("step", 2)] for name in SCRIPTS} | {"run_glue": [("step", 2), ("checkpoint", 4)]}


@pytest.fixture(scope="module")
def commands(tiny_bert, glue_dir, text_file, multi30k_dir):
    return lambda name, output_dir: command(name, output_dir, tiny_bert, glue_dir, text_file, multi30k_dir)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, commands):
    finished = {}

    def state(name):
        if name not in finished:
            cwd = tmp_path_factory.mktemp(name)
            run(commands(name, cwd / "out"), cwd)
            finished[name] = {**final_state(cwd / "out", "checkpoint-6"), "pickled": pickled_files(cwd / "out")}
        return finished[name]

    return state


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_killed_run_resumes_to_the_same_model(name, tmp_path, commands, uninterrupted):
    full_command = commands(name, tmp_path / "out")
    resume_note = "checkpoint-2 (step 2 of 6); to train from the start instead"
    for kills, (point, step) in enumerate(KILL_POINTS[name]):
        printed = killed(full_command, tmp_path, point, step)
        assert (kills == 0) != (resume_note in printed)  # a run after a kill resumes
        assert (tmp_path / "out" / "checkpoint-2" / "trainer_state.json").exists()
        if point == "checkpoint":
            half = tmp_path / "out" / f"checkpoint-{step}"
            assert (half / "model.safetensors").exists() and not (half / "trainer_state.json").exists()
    resumed = run(full_command, tmp_path)
    log = resumed.stdout + resumed.stderr
    assert resume_note in log
    if name == "run_glue":
        assert "checkpoint-4 is incomplete (it has no trainer_state.json" in log
    state = final_state(tmp_path / "out", "checkpoint-6")
    assert_same_run(train_loss_free(state), train_loss_free(uninterrupted(name)))
    assert len(gate_records(state["log_history"])) == 3 + 1  # three evaluations in training, the final one
    if name != "run_translation":
        assert {group["initial_lr"] for group in state["param_groups"]} == {1e-4, 1e-3}


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_runs_write_weights_only_as_safetensors(name, uninterrupted):
    """What a run leaves for loading holds no pickle (training_args.bin, transformers' record of the run, aside;
    the checkpoint folders hold Trainer's own resume state)."""
    assert uninterrupted(name)["pickled"] == []


# --- preemption: SIGTERM or SIGUSR1 saves the step it came in, and the same command continues --------------------


def assert_stopped_and_saved(log, output_dir, step, processes=1):
    """What a preempted run leaves: the message, the checkpoint of `step`, nothing more."""
    assert f"Stopped at step {step} and saved {output_dir}/checkpoint-{step}: run the same command" in log
    assert checkpoint_problem(output_dir / f"checkpoint-{step}", processes) is None
    assert not (output_dir / "model.safetensors").exists()  # the run's end (final save, evaluation) is not done


@pytest.mark.parametrize("name, signal_name", [("run_mlm", "SIGUSR1"), ("run_translation", "SIGTERM")])
def test_a_signal_saves_the_step_it_came_in_and_the_same_command_continues(
    name, signal_name, tmp_path, commands, uninterrupted
):
    """Signalled inside step 3 (after checkpoint-2): checkpoint-3 is saved, and the resumed run ends as an
    uninterrupted one."""
    output_dir = tmp_path / "out"
    full_command = commands(name, output_dir)
    process, pid, log_path = stopped(full_command, tmp_path, "signal", 2)
    os.kill(pid, getattr(signal, signal_name))
    exit_code, log = finished(process, log_path)
    assert exit_code == PREEMPTED_EXIT_CODE, log[-4000:]
    assert f"Process 0: received {signal_name}; saving step 3 and stopping." in log
    assert_stopped_and_saved(log, output_dir, 3)
    if name == "run_translation":  # its RunClock writes the time spent into every checkpoint, the signal's too
        assert read_json(output_dir / "checkpoint-3" / RUN_TIME_NAME)["step"] == 3
    resumed = run(full_command, tmp_path)
    assert "checkpoint-3 (step 3 of 6); to train from the start instead" in resumed.stdout + resumed.stderr
    state = final_state(output_dir, "checkpoint-6")
    assert_same_run(train_loss_free(state), train_loss_free(uninterrupted(name)))


# --- preemption under Trainer's save options: run_glue in this process, SIGTERM sent from a step or an evaluation ---

# Each entry: the options (on top of `command`'s), and where the runs after the unbroken one are signalled in turn
# (tests/interrupted.py's points), each run by the same command, the last one left to end.
# - "best": --save_strategy best saves a new best only, and --save_total_limit 1 with --load_best_model_at_end
#   deletes every checkpoint but the best at the end of training. At a learning rate of 1e-2 the evaluation loss
#   rises from step 2 on, which stays the best (asserted), so that neither would keep the checkpoints of steps 4, 5
#   and 6. Signalled inside step 4 (whose evaluation is no new best), step 5, and the evaluation of step 6, the last;
#   then, in the runs resumed from checkpoint-6, while the best model loads, in the final save and in the final
#   evaluation.
# - "steps": checkpoints every two steps with --save_total_limit 1 and --load_best_model_at_end (Trainer's end of
#   training deletes checkpoint-6, the last, before the final save and evaluation), the same rising loss: signalled
#   after the unbroken training while the best model loads, then in the final save and in the final evaluation.
# - "no": --save_strategy no, no checkpoint but the signal's; signalled inside step 3, then in the final save (the
#   checkpoint of step 6 is kept for the end) and in the final evaluation.
# - "epoch": --save_strategy epoch with epochs of four steps, signalled inside step 4 (which ends the first) and
#   step 6, the last (inside the second: max_steps is not a whole number of epochs), then in the final save and the
#   final evaluation.
AFTER_TRAINING = [("sigterm-in-final-save", 6), ("sigterm-in-final-evaluation", 6)]
BEST_MODEL = ["--metric_for_best_model", "loss", "--load_best_model_at_end", "--save_total_limit", "1",
              "--learning_rate", "1e-2", "--context_learning_rate", "1e-2"]  # fmt: skip
SAVE_OPTIONS = {
    "best": (
        ["--save_strategy", "best", *BEST_MODEL],
        [("sigterm", 3), ("sigterm", 4), ("sigterm-in-evaluation", 6), ("sigterm-in-best-model", 6), *AFTER_TRAINING],
    ),
    "steps": (BEST_MODEL, [("sigterm-in-best-model", 6), *AFTER_TRAINING]),
    "no": (["--save_strategy", "no"], [("sigterm", 2), *AFTER_TRAINING]),
    "epoch": (["--save_strategy", "epoch", "--eval_strategy", "epoch", "--max_train_samples", "32"],
              [("sigterm", 3), ("sigterm", 5), *AFTER_TRAINING]),
}  # fmt: skip
# What each point after training says it was in.
DURING = {
    "sigterm-in-best-model": "the end of training (the best model's loading)",
    "sigterm-in-final-save": "the final save",
    "sigterm-in-final-evaluation": "the final evaluation",
}


def run_here(module, command, marker, stop=None):
    """`command`'s script run in this process (its `main()`), with `stop` = (point, global_step) reached as
    tests/interrupted.py reaches it: its exit code and what the script, casan_hf and transformers logged."""
    messages = []
    collect = logging.Handler()
    collect.emit = lambda record: messages.append(record.getMessage())
    loggers = [logging.getLogger(name) for name in (module.__name__, "casan_hf", "transformers")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", list(map(str, command[1:])))
        if stop is not None:
            patch.setattr(Trainer, *stopping(*stop, marker))
        for logger in loggers:
            logger.addHandler(collect)
        try:
            module.main()
            exit_code = 0
        except SystemExit as exit:
            exit_code = exit.code
        finally:
            for logger in loggers:
                logger.removeHandler(collect)
    return exit_code, "\n".join(messages)


def checkpoints(output_dir):
    return sorted(path.name for path in output_dir.glob("checkpoint-*"))


@pytest.fixture(scope="module")
def save_option_runs(tmp_path_factory, commands):
    """For an entry of `SAVE_OPTIONS`: the unbroken run's final state and trainer state; each signalled run's exit
    code, log and checkpoints; the last run's log and final state."""
    module = load_script("run_glue")
    finished = {}

    def runs(name):
        if name not in finished:
            options, stops = SAVE_OPTIONS[name]
            cwd = tmp_path_factory.mktemp(f"save_{name}")
            unbroken, output_dir = cwd / "unbroken", cwd / "out"
            assert run_here(module, [*commands("run_glue", unbroken), *options], cwd / "reached")[0] == 0
            command = [*commands("run_glue", output_dir), *options]
            signalled = []
            for stop in stops:
                exit_code, log = run_here(module, command, cwd / "reached", stop)
                signalled.append({"exit_code": exit_code, "log": log, "checkpoints": checkpoints(output_dir)})
            exit_code, log = run_here(module, command, cwd / "reached")
            assert exit_code == 0, log[-4000:]
            finished[name] = {
                "stops": stops,
                "unbroken_checkpoints": checkpoints(unbroken),
                "last_checkpoints": checkpoints(output_dir),
                "unbroken": final_state(unbroken),
                "unbroken_state": read_json(unbroken / "trainer_state.json"),
                "signalled": signalled,
                "output_dir": output_dir,
                "last_log": log,
                "resumed": final_state(output_dir),
            }
        return finished[name]

    return runs


def assert_stopped_at(signalled, output_dir, step):
    assert signalled["exit_code"] == PREEMPTED_EXIT_CODE, signalled["log"][-4000:]
    assert f"Stopped at step {step} and saved {output_dir}/checkpoint-{step}: run the same command" in signalled["log"]
    assert f"checkpoint-{step}" in signalled["checkpoints"]


def test_save_strategy_best_keeps_the_step_a_signal_came_in_without_a_new_best(save_option_runs):
    runs = save_option_runs("best")
    assert runs["unbroken_state"]["best_global_step"] == 2  # the premise: steps 4 and 6 make no new best
    assert_stopped_at(runs["signalled"][0], runs["output_dir"], 4)


def test_save_total_limit_1_with_the_best_model_keeps_the_signal_checkpoint_for_the_resume(save_option_runs):
    """Trainer's end of training would delete every checkpoint but the best (step 2); the stopped run skips it."""
    runs = save_option_runs("best")
    signalled = runs["signalled"][1]
    assert_stopped_at(signalled, runs["output_dir"], 5)
    assert signalled["checkpoints"] == ["checkpoint-2", "checkpoint-5"]
    assert "checkpoint-5 (step 5 of 6); to train from the start instead" in runs["signalled"][2]["log"]


def test_a_signal_in_the_last_evaluation_saves_the_last_step_and_the_resume_adds_no_step(save_option_runs):
    runs = save_option_runs("best")
    signalled = runs["signalled"][2]
    assert "Process 0: received SIGTERM; saving step 6 and stopping." in signalled["log"]
    assert_stopped_at(signalled, runs["output_dir"], 6)
    assert "checkpoint-6 (step 6 of 6); to train from the start instead" in runs["signalled"][3]["log"]
    assert runs["resumed"]["global_step"] == 6


@pytest.mark.parametrize("name", SAVE_OPTIONS)
def test_a_signal_after_the_last_step_exits_75_and_the_same_command_finishes_without_a_step(name, save_option_runs):
    """While the best model loads, in the final save or in the final evaluation: exit 75 naming the checkpoint of
    the last step, which exists (kept for the end), and the next run resumes from it at the last step. Once the run
    has ended, the checkpoint of the last step is there if and only if the unbroken run keeps it."""
    runs = save_option_runs(name)
    output_dir, stops = runs["output_dir"], runs["stops"]
    after = [index for index, (point, _) in enumerate(stops) if point in DURING]
    assert after, stops
    for index in after:
        signalled = runs["signalled"][index]
        assert signalled["exit_code"] == PREEMPTED_EXIT_CODE, signalled["log"][-4000:]
        during = DURING[stops[index][0]]
        expected = f"Received SIGTERM during {during}: run the same command to finish from {output_dir}/checkpoint-6."
        assert expected in signalled["log"]
        assert "checkpoint-6" in signalled["checkpoints"]
        following = runs["signalled"][index + 1]["log"] if index + 1 < len(stops) else runs["last_log"]
        assert "checkpoint-6 (step 6 of 6); to train from the start instead" in following
    assert ("checkpoint-6" in runs["last_checkpoints"]) == ("checkpoint-6" in runs["unbroken_checkpoints"])


def test_save_strategy_no_keeps_the_signal_checkpoint(save_option_runs):
    runs = save_option_runs("no")
    assert_stopped_at(runs["signalled"][0], runs["output_dir"], 3)
    assert runs["signalled"][0]["checkpoints"] == ["checkpoint-3"]


def test_save_strategy_epoch_keeps_an_epoch_end_and_a_signal_in_the_last_step_adds_no_step(save_option_runs):
    """Step 4 ends the first epoch: its checkpoint holds the end-of-epoch evaluation. Step 6 is the last, inside
    the second epoch: the resume from its checkpoint trains no step 7 and evaluates that epoch's end once."""
    runs = save_option_runs("epoch")
    first, last = runs["signalled"][:2]
    assert_stopped_at(first, runs["output_dir"], 4)
    state = read_json(runs["output_dir"] / "checkpoint-4" / "trainer_state.json")
    assert [record["step"] for record in state["log_history"] if "eval_loss" in record] == [4]
    assert_stopped_at(last, runs["output_dir"], 6)
    assert "checkpoint-6 (step 6 of 6); to train from the start instead" in runs["signalled"][2]["log"]
    assert runs["resumed"]["global_step"] == 6


@pytest.mark.parametrize("name", SAVE_OPTIONS)
def test_a_run_signalled_under_any_save_options_resumes_to_the_unbroken_run(name, save_option_runs):
    runs = save_option_runs(name)
    assert_same_run(train_loss_free(runs["resumed"]), train_loss_free(runs["unbroken"]))


def test_a_checkpoint_without_one_process_rng_state_is_incomplete_for_a_run_of_several(tmp_path):
    (tmp_path / "trainer_state.json").write_text("{}")
    assert checkpoint_problem(tmp_path, 2) is None  # no RNG state at all: a checkpoint of the model only
    (tmp_path / "rng_state_0.pth").write_bytes(b"")
    assert checkpoint_problem(tmp_path, 2).startswith("it has no RNG state of process 1, rng_state_1.pth")
    assert checkpoint_problem(tmp_path, 1) is None
    (tmp_path / "rng_state_1.pth").write_bytes(b"")
    assert checkpoint_problem(tmp_path, 2) is None


TWO_PROCESSES = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


def test_two_processes_survive_a_rank_killed_while_saving_and_a_signal_to_one_rank(tmp_path, commands):
    """run_glue in two gloo processes (eight examples a process and step: an epoch of four steps), through two
    faults in turn, each run resumed by the same command. Rank 1 SIGKILLed while it writes checkpoint-4 (after
    checkpoint-2), once rank 0 has written all of its own share, trainer_state.json last (torchrun then stops the
    job): checkpoint-4 lacks rank 1's RNG state, and the resume skips it, naming it. SIGTERM to rank 1 alone inside
    step 5: both ranks save checkpoint-5 and exit 75. The last run ends with the weights, log history and optimizer
    state of an unbroken run."""
    unbroken = tmp_path / "unbroken"
    run([*TWO_PROCESSES, *commands("run_glue", unbroken / "out")[1:]], unbroken.mkdir() or unbroken)
    output_dir = tmp_path / "out"
    command = [*TWO_PROCESSES, *commands("run_glue", output_dir)[1:]]

    process, pid, log_path = stopped(command, tmp_path, "checkpoint@1", 4)
    deadline = time.monotonic() + 60
    while not (output_dir / "checkpoint-4" / "trainer_state.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    exit_code, log = finished(process, log_path)
    assert exit_code != 0 and checkpoint_problem(output_dir / "checkpoint-2", 2) is None, log[-4000:]
    assert (output_dir / "checkpoint-4" / "trainer_state.json").exists()
    assert not (output_dir / "checkpoint-4" / "rng_state_1.pth").exists()

    process, pid, log_path = stopped(command, tmp_path, "signal@1", 4)
    os.kill(pid, signal.SIGTERM)
    exit_code, log = finished(process, log_path)
    assert "checkpoint-4 is incomplete (it has no RNG state of process 1, rng_state_1.pth" in log
    assert "Process 1: received SIGTERM; saving step 5 and stopping." in log
    assert "Process 0: another process received a signal; saving step 5 and stopping." in log
    # torchrun exits 1 when its workers fail; each worker exited 75.
    assert exit_code == 1 and f"failed (exitcode: {PREEMPTED_EXIT_CODE})" in log, log[-4000:]
    assert_stopped_and_saved(log, output_dir, 5, processes=2)

    resumed = run(command, tmp_path)
    assert "checkpoint-5 (step 5 of 6); to train from the start instead" in resumed.stdout + resumed.stderr
    expected = train_loss_free(final_state(unbroken / "out", "checkpoint-6"))
    assert_same_run(train_loss_free(final_state(output_dir, "checkpoint-6")), expected)


def test_a_checkpoint_of_the_model_only_is_refused_unless_its_weights_alone_are_asked_for(tmp_path):
    """A `--save_only_model` checkpoint (no optimizer, scheduler or RNG state) found in --output_dir or named by
    --resume_from_checkpoint is refused, naming what it lacks and what to pass; --resume_weights_only takes it."""
    checkpoint = tmp_path / "checkpoint-4"
    checkpoint.mkdir()
    (checkpoint / "trainer_state.json").write_text("{}")
    (checkpoint / "model.safetensors").write_bytes(b"")
    found = TrainingArguments(output_dir=str(tmp_path), do_train=True, report_to="none")
    named = TrainingArguments(
        output_dir=str(tmp_path / "new"), resume_from_checkpoint=str(checkpoint), report_to="none"
    )
    refusal = re.escape(f"{checkpoint} holds the model only (saved with --save_only_model): without the optimizer's")
    for args in (found, named):
        with pytest.raises(ValueError, match=refusal + ".*Pass --resume_weights_only"):
            find_checkpoint(args, False)
        assert find_checkpoint(args, False, weights_only=True) == str(checkpoint)
    (checkpoint / "optimizer.pt").write_bytes(b"")
    assert find_checkpoint(found, False) == str(checkpoint)


def test_a_run_saving_the_model_only_is_refused_on_resume_until_told_to_resume_its_weights(tmp_path, commands):
    """run_glue with --save_only_model, signalled inside step 3: the stop names --resume_weights_only; the same
    command is refused before any work, with it the run resumes and ends."""
    module = load_script("run_glue")
    command = [*commands("run_glue", tmp_path / "out"), "--save_only_model", "--save_strategy", "no"]
    exit_code, log = run_here(module, command, tmp_path / "reached", ("sigterm", 2))
    assert exit_code == PREEMPTED_EXIT_CODE and "run the same command with --resume_weights_only" in log, log[-4000:]
    exit_code, log = run_here(module, command, tmp_path / "reached")
    assert exit_code.startswith(f"run_glue.py: error: {tmp_path}/out/checkpoint-3 holds the model only")
    assert "Pass --resume_weights_only" in exit_code and "***** Running training *****" not in log
    exit_code, log = run_here(module, [*command, "--resume_weights_only"], tmp_path / "reached")
    assert exit_code == 0 and "checkpoint-3 (step 3 of 6); to train from the start instead" in log, log[-4000:]


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_resume_that_trains_no_step_keeps_the_finished_runs_training_figures(name, tmp_path, commands):
    """Signalled in the final save (before the training's figures are written), then, resumed at the last step, in
    the final evaluation, then finished: each resume trains no step, and train_results.json, all_results.json and
    the log history hold the figures of the six steps the first run trained, not a loss and speeds of 0."""
    module, output_dir = load_script(name), tmp_path / "out"
    command = commands(name, output_dir)
    for stop in [*AFTER_TRAINING, None]:
        exit_code, log = run_here(module, command, tmp_path / "reached", stop)
        assert exit_code == (0 if stop is None else PREEMPTED_EXIT_CODE), log[-4000:]
        if stop == AFTER_TRAINING[0]:
            assert not (output_dir / "train_results.json").exists()
            kept = read_json(output_dir / "checkpoint-6" / "train_figures.json")
            assert kept["train_loss"] > 0 and kept["train_samples_per_second"] > 0
    written = read_json(output_dir / "train_results.json")
    assert {key: written[key] for key in kept} == kept
    assert {key: read_json(output_dir / "all_results.json")[key] for key in kept} == kept
    (ended,) = [
        record for record in read_json(output_dir / "trainer_state.json")["log_history"] if "train_loss" in record
    ]
    assert ended["train_loss"] == kept["train_loss"]


def test_a_resume_with_options_that_shape_the_model_or_optimizer_is_refused_and_other_changes_are_said(
    tmp_path, commands
):
    """Stopped at step 3, the run is resumed by commands that differ from its own. The local bias (which loaded with
    missing keys and died in torch's optimizer: `loaded state dict contains a parameter group that doesn't match`),
    another learning rate or seed are refused in one line before any work, naming each option's old and new value
    and the way out; another evaluation interval and more steps are said and the run resumes."""
    module, output_dir = load_script("run_glue"), tmp_path / "out"
    command = commands("run_glue", output_dir)
    assert run_here(module, command, tmp_path / "reached", ("sigterm", 2))[0] == PREEMPTED_EXIT_CODE
    refused = {
        ("--local_bias", "query", "--local_layers", "0"): "local_bias None -> 'query', local_layers None -> [0]",
        ("--learning_rate", "1e-3", "--seed", "8"): "learning_rate 0.0001 -> 0.001, seed 7 -> 8",
    }
    for options, said in refused.items():
        exit_code, _ = run_here(module, [*command, *options], tmp_path / "reached")
        assert exit_code == (
            f"run_glue.py: error: {output_dir}/checkpoint-3 was trained with other options than this run's: {said}; "
            "resume with the old values, or pass --overwrite_output_dir to train from scratch."
        )
    assert checkpoints(output_dir) == ["checkpoint-2", "checkpoint-3"]
    exit_code, log = run_here(module, [*command, "--eval_steps", "3", "--max_steps", "8"], tmp_path / "reached")
    assert exit_code == 0, log[-4000:]
    said = "max_steps 6 -> 8, eval_steps 2 -> 3."
    assert f"Resuming {output_dir}/checkpoint-3 with changed settings the checkpoint does not depend on: {said}" in log
    started = read_json(output_dir / "run_start.json")
    assert [resume["arguments"]["TrainingArguments"]["max_steps"] for resume in started["resumes"]] == [8]


def test_two_processes_stop_within_a_step_of_the_signal_whatever_the_logging_interval(tmp_path, commands):
    """run_glue in two gloo processes logging, evaluating and saving every 500 steps (the scripts' default loss
    interval reaches 500), SIGTERM to rank 1 alone inside step 5 of 12 (epochs of four steps): the processes' vote
    at every step's end stops both at the end of step 6, the step after the signal's (before, they were asked only
    at the steps that log, evaluate or save and at epoch ends: step 8 here, 500 in a long epoch)."""
    output_dir = tmp_path / "out"
    rare = ["--logging_steps", "500", "--eval_steps", "500", "--save_steps", "500", "--max_steps", "12"]
    command = [*TWO_PROCESSES, *commands("run_glue", output_dir)[1:], *rare]
    process, pid, log_path = stopped(command, tmp_path, "signal@1", 4)
    os.kill(pid, signal.SIGTERM)
    exit_code, log = finished(process, log_path)
    assert "Process 1: received SIGTERM; saving step 6 and stopping." in log, log[-4000:]
    assert "Process 0: another process received a signal; saving step 6 and stopping." in log
    assert exit_code == 1 and f"failed (exitcode: {PREEMPTED_EXIT_CODE})" in log, log[-4000:]
    assert_stopped_and_saved(log, output_dir, 6, processes=2)
