"""casan_hf.studies, the runner and paired table of both studies: the results file says what is finished, a
sweep killed mid-run and started again runs only what has no record (the cut-off run from the start), a progress
line per run, failed runs named, a record made with other settings not taken for the run's; the paired statistics
against the twin."""

import json
import math
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from scipy import stats

from casan_hf.studies import (
    Comparison,
    Run,
    SettingsMismatch,
    detectable_difference,
    load_results,
    mean_gates,
    paired,
    paired_figure,
    paired_interval,
    paired_table,
    run_sweep,
)
from casan_hf.studies.figure import ARM_LINE, arm_label
from casan_hf.studies.grid import time_left
from casan_hf.studies.paired import POWER


# A stand-in for a training script: writes its seed's score into the folder, or hangs on a seed told to.
FAKE_RUN = textwrap.dedent(
    """
    import json, os, pathlib, sys, time
    folder, seed = pathlib.Path(sys.argv[1]), int(sys.argv[2])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "started").write_text(str(os.getpid()))
    if str(seed) == os.environ.get("HANG_ON_SEED"):
        time.sleep(600)
    (folder / "score.json").write_text(json.dumps({"score": seed + (1 if sys.argv[3] == "casan" else 0)}))
    """
)
SWEEP = textwrap.dedent(
    """
    import json, pathlib, sys
    from casan_hf.studies import Run, run_sweep
    root = pathlib.Path(sys.argv[1])
    runs = [
        Run({"variant": variant, "seed": seed}, root / variant / f"seed{seed}",
            ([sys.executable, str(root / "fake_run.py"), str(root / variant / f"seed{seed}"), str(seed), variant],))
        for seed in (1, 2, 3) for variant in ("twin", "casan")
    ]
    collect = lambda run: json.loads((run.folder / "score.json").read_text())
    failed = run_sweep(runs, root / "results.json", collect, lambda records: f"{len(records)} records\\n")
    sys.exit(1 if failed else 0)
    """
)


@pytest.fixture
def study(tmp_path):
    (tmp_path / "fake_run.py").write_text(FAKE_RUN)
    (tmp_path / "sweep.py").write_text(SWEEP)
    return tmp_path


def start_sweep(root, **env):
    return subprocess.Popen(
        [sys.executable, str(root / "sweep.py"), str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env},
        start_new_session=True,  # its own process group, killed whole as a machine's stop would
    )


def test_a_killed_sweep_resumes_with_the_runs_that_have_no_record(study):
    sweep = start_sweep(study, HANG_ON_SEED="2")
    hanging = study / "twin" / "seed2" / "started"
    deadline = time.time() + 120
    while not hanging.exists() and time.time() < deadline:
        time.sleep(0.2)
    assert hanging.exists(), sweep.communicate()[0]
    os.killpg(sweep.pid, signal.SIGKILL)
    sweep.wait()
    first = load_results(study / "results.json")
    assert [(r["variant"], r["seed"]) for r in first] == [("twin", 1), ("casan", 1)]
    assert (study / "results.md").read_text() == "2 records\n"
    finished_before = (study / "twin" / "seed1" / "started").stat().st_mtime_ns

    output = subprocess.run(
        [sys.executable, str(study / "sweep.py"), str(study)], capture_output=True, text=True, timeout=300
    ).stdout
    assert "6 runs: 2 finished before, 4 to run, 1 at a time" in output
    progress = [line for line in output.splitlines() if line.startswith("[")]
    assert len(progress) == 4 and progress[-1].startswith("[4/4] casan 3: finished in ")
    assert "elapsed" in progress[0] and "left" in progress[0]
    records = load_results(study / "results.json")
    assert records[:2] == first  # kept as they were, not run again
    assert (study / "twin" / "seed1" / "started").stat().st_mtime_ns == finished_before
    assert sorted((r["variant"], r["seed"], r["score"]) for r in records) == sorted(
        (variant, seed, seed + (variant == "casan")) for variant in ("twin", "casan") for seed in (1, 2, 3)
    )
    assert all(r["wall_seconds"] >= 0 for r in records)
    assert not list(study.glob(".*.tmp"))  # written through a rename


def test_time_left_counts_the_runs_that_run_at_once():
    assert time_left([600, 660], runs_left=37, parallel=2) == 630 * 37 / 2
    assert time_left([600], runs_left=1, parallel=2) == 600  # the last run has no other beside it
    assert time_left([600], runs_left=0, parallel=2) == 0


def test_a_failed_run_is_named_and_has_no_record(tmp_path, capsys):
    runs = [
        Run({"seed": seed}, tmp_path / f"seed{seed}", ([sys.executable, "-c", f"import sys; sys.exit({seed})"],))
        for seed in (0, 3)
    ]
    failed = run_sweep(runs, tmp_path / "results.json", lambda run: {}, lambda records: "")
    assert failed == [tmp_path / "seed3.log"]
    assert [record["seed"] for record in json.loads((tmp_path / "results.json").read_text())] == [0]
    assert f"FAILED (exit 3; log {tmp_path / 'seed3.log'})" in capsys.readouterr().out


def test_the_figure_is_drawn_again_as_each_record_lands(tmp_path):
    runs = [Run({"seed": seed}, tmp_path / f"seed{seed}", ([sys.executable, "-c", "pass"],)) for seed in (1, 2)]
    drawn = []
    run_sweep(runs, tmp_path / "results.json", lambda run: {}, lambda records: "", draw_figure=drawn.append)
    assert [[record["seed"] for record in records] for records in drawn] == [[1], [1, 2]]


def test_a_record_made_with_other_settings_stops_the_sweep_before_it_runs(tmp_path, capsys):
    results = tmp_path / "results.json"

    def sweep(settings, seeds=(1,)):
        command = [sys.executable, "-c", f"open({str(tmp_path / 'ran')!r}, 'a').write('x')"]
        runs = [Run({"seed": seed}, tmp_path / f"seed{seed}", (command,), settings) for seed in seeds]
        return run_sweep(runs, results, lambda run: {}, str)

    assert sweep({"learning_rate": 0.1, "layers": (1, 2)}) == []
    assert load_results(results)[0]["settings"] == {"learning_rate": 0.1, "layers": [1, 2]}
    assert sweep({"learning_rate": 0.1, "layers": (1, 2)}) == []  # its own record: not run again
    assert "1 finished before, 0 to run" in capsys.readouterr().out
    with pytest.raises(SettingsMismatch) as error:
        sweep({"learning_rate": 0.2, "layers": (1, 2), "dropout": 0.1})
    assert str(error.value).startswith(
        f"{results} holds 1 record(s) of this sweep's runs (at any seed) made with other settings: "
        "dropout None there, 0.1 here; learning_rate 0.1 there, 0.2 here. A results file holds one study"
    )
    # Other seeds with other settings would be pooled with the recorded ones in one table.
    with pytest.raises(SettingsMismatch, match="learning_rate 0.1 there, 0.2 here"):
        sweep({"learning_rate": 0.2, "layers": (1, 2)}, seeds=(2, 3))
    results.write_text(json.dumps([{"seed": 1}]))
    with pytest.raises(SettingsMismatch, match="made with other settings: settings not recorded there"):
        sweep({"learning_rate": 0.1})
    assert (tmp_path / "ran").read_text() == "x"  # only the first sweep ran


def test_paired_statistics_against_the_twin():
    mean, interval, won, beyond = paired([1.0, 2.0, 3.0])
    assert mean == "+2.00 ± 1.00" and won == "3/3 (p=0.25)"
    assert interval == "[-0.48, +4.48]"  # t(0.975, 2) = 4.303
    assert beyond == "no"  # the mean is above its std, but the interval holds 0: not beyond the spread
    assert paired([1.9, 2.0, 2.1])[3] == "yes, better" and paired([-1.9, -2.0, -2.1])[3] == "yes, worse"
    # a loss: lower is better, so a negative difference is a win
    assert paired([-1.9, -2.0, -2.1], lower_is_better=True)[2:] == ["3/3 (p=0.25)", "yes, better"]
    assert paired([0.5]) == ["-"] * 4
    rows = [(["twin"], [{"seed": 1, "s": 1.0}], None), (["casan"], [{"seed": 1, "s": 2.0}], [])]
    table = paired_table(Comparison("t: score", ("variant",), rows, lambda r: r["s"]))
    assert "| twin | 1.00 (n=1) | (twin) |" in table and "| casan | 2.00 (n=1) | - |" in table


def test_the_detectable_difference_is_found_with_80_percent_power():
    differences = [0.01, 0.03, -0.02, 0.02, 0.0]
    factor = detectable_difference(differences) / statistics.stdev(differences)
    assert factor == pytest.approx(1.662, abs=1e-3)  # (t(0.975, 4) + t(0.80, 4)) / sqrt(5)
    # A true mean difference of that size, with that spread, lands beyond the spread with POWER's probability (its
    # t statistic is noncentral t, noncentrality factor * sqrt(5)); one of the half-width, little more than half the
    # time.
    critical = stats.t.ppf(0.975, 4)
    assert stats.nct.sf(critical, 4, factor * math.sqrt(5)) == pytest.approx(POWER, abs=0.02)
    assert 0.5 < stats.nct.sf(critical, 4, critical) < 0.6


def test_gate_means_count_every_layer_with_context_by_its_config():
    options = {"context_type": "deep_global", "context_targets": ["query", "key"], "context_layers": None}
    closed = {"variant": "deep_global", "context_options": options, "gates": {"query": [0.3, 0.6], "key": [0.3, 0.0]}}
    assert mean_gates([closed]) == "0.450 / 0.150"  # the closed key gate of layer 1 counts
    # deep's first layer has no earlier layer to read: no context there, though its gates are logged as 0; a record
    # made before context_options were kept is read by its arm's name.
    deep = {"variant": "deep", "gates": {"query": [0.0, 0.4], "key": [0.0, 0.2]}}
    assert mean_gates([deep]) == "0.400 / 0.200"
    assert mean_gates([closed, deep, {"variant": "none", "gates": None}]) == "0.433 / 0.167"
    query_only = {**closed, "context_options": {**options, "context_targets": ["query"], "context_layers": [1]}}
    assert mean_gates([query_only]) == "0.600 / -"
    assert mean_gates([{"variant": "none", "gates": None}]) == "-"


def test_the_figure_draws_each_seeds_difference_to_the_twin_and_their_interval(tmp_path):
    twin = [{"seed": seed, "s": score} for seed, score in ((1, 10.0), (2, 11.0), (3, 12.0))]
    casan = [{"seed": seed, "s": score} for seed, score in ((1, 11.0), (2, 11.5), (3, 14.0), (4, 9.0))]
    rows = [(["small", "none"], twin, None), (["small", "casan"], casan, twin)]
    path = tmp_path / "figures" / "study.png"
    figure = paired_figure([Comparison("t: score", ("size", "variant"), rows, lambda r: r["s"])], path)
    assert path.read_bytes().startswith(b"\x89PNG")
    (axis,) = figure.axes
    assert list(axis.collections[0].get_offsets()[:, 0]) == [1.0, 0.5, 2.0]  # seed 4 has no twin
    mean, _, half = paired_interval([1.0, 0.5, 2.0])
    (diamond,) = [line for line in axis.lines if line.get_marker() == "D"]
    assert list(diamond.get_xdata()) == [mean]
    assert [label.get_text() for label in axis.get_yticklabels()] == ["casan"]  # "small" names every row
    assert axis.get_title(loc="left") == "t: score; twin none: 11.00 ± 1.00 (n=3)"
    assert f"{mean:+.2f}, won 3/3" in [text.get_text() for text in axis.texts]
    # A variant whose twin has none of its seeds (or no runs yet) has nothing to draw; a panel of only those none.
    unpaired = [
        (["small", "none"], twin, None),
        (["small", "casan"], casan, []),
        (["small", "other"], casan[3:], twin),
    ]
    figure = paired_figure(
        [
            Comparison("t: score", ("size", "variant"), rows, lambda r: r["s"]),
            Comparison("u: score", ("size", "variant"), unpaired, lambda r: r["s"]),
        ],
        path,
    )
    assert [axis.get_title(loc="left").split(";")[0] for axis in figure.axes] == ["t: score"]
    for comparisons in ([], [Comparison("u: score", ("size", "variant"), unpaired, lambda r: r["s"])]):
        with pytest.raises(ValueError, match="nothing to draw"):
            paired_figure(comparisons, path)


def test_the_figure_breaks_long_arms_after_their_commas_and_gives_the_metrics_digits(tmp_path):
    """An arm's options go on lines of at most `ARM_LINE` characters, broken after a comma and never inside an
    option; the mean beside each row has the comparison's digits (3 for a cross-entropy)."""
    arm = 'global:context_targets=[],output_gate="elementwise",output_gate_context=true'
    label = arm_label(arm)
    lines = label.split("\n")
    assert lines == ["global:", "context_targets=[],", 'output_gate="elementwise",', "output_gate_context=true"]
    assert all(len(line) <= ARM_LINE for line in lines) and "".join(lines) == arm
    assert arm_label("none") == "none" and arm_label("rte deep_global") == "rte deep_global"
    twin = [{"seed": seed, "s": score} for seed, score in ((1, 2.40), (2, 2.41), (3, 2.42))]
    casan = [{"seed": seed, "s": score} for seed, score in ((1, 2.401), (2, 2.414), (3, 2.421))]
    rows = [(["none"], twin, None), ([arm], casan, twin)]
    comparison = Comparison("t: cross-entropy", ("variant",), rows, lambda r: r["s"], lower_is_better=True, digits=3)
    (axis,) = paired_figure([comparison], tmp_path / "figure.png").axes
    assert [text.get_text() for text in axis.texts] == ["+0.002, won 0/3"]
    assert [tick.get_text() for tick in axis.get_yticklabels()] == [label]


def test_sweeps_sharing_a_results_file_keep_each_others_records(tmp_path):
    """Two sweeps at once on one results file (e.g. other seeds started beside a running grid): every record
    lands, whichever writes last."""
    results = tmp_path / "results.json"

    def sweep(seeds):
        runs = [
            Run({"seed": seed}, tmp_path / f"seed{seed}", ([sys.executable, "-c", "import time; time.sleep(0.2)"],))
            for seed in seeds
        ]
        return run_sweep(runs, results, lambda run: {}, lambda records: f"{len(records)} records\n")

    with ThreadPoolExecutor(max_workers=2) as pool:
        assert list(pool.map(sweep, [(1, 3, 5), (2, 4, 6)])) == [[], []]
    assert sorted(record["seed"] for record in load_results(results)) == [1, 2, 3, 4, 5, 6]
    assert results.with_suffix(".md").read_text() == "6 records\n"
