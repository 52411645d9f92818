"""Study arms: a variant with the context options it sets, spelled on the command line, checked as the config
checks them, named canonically, and never pooled with runs of other options."""

import pytest
from conftest import glue_sweep_runs, load_script

from casan_hf.studies import Arm, arm_words, check_cells, parse_arm


VARIANTS = ("none", "global", "deep", "deep_global")


def test_an_arm_is_its_variant_and_its_checked_options_in_one_name():
    arm = parse_arm("deep_global:gate_per_head,gate_bias_init=0", VARIANTS)
    assert arm == Arm("deep_global", (("gate_bias_init", 0.0), ("gate_per_head", True)))
    assert arm.name == "deep_global:gate_bias_init=0.0,gate_per_head=true"
    assert parse_arm(arm.name, VARIANTS) == arm  # the name spells the arm
    assert arm.flags() == ["--gate_bias_init", "0.0", "--gate_per_head", "true"]
    targets = parse_arm('deep:context_targets=["key"],context_rank=64', VARIANTS)
    assert targets.flags() == ["--context_rank", "64", "--context_targets", "key"]
    assert parse_arm("none", VARIANTS) == Arm("none") and Arm("none").name == "none"


def test_an_arm_in_words_is_its_context_and_its_parsed_options():
    assert arm_words("deep_global") == "deep_global context"
    assert arm_words("none") == "no context" and arm_words("baseline") == "baseline"
    assert arm_words('global:context_targets=[],output_gate="elementwise",output_gate_context=true') == (
        "global context (no context targets, output gate elementwise, output gate context)"
    )
    assert arm_words("deep_global:gate_per_head,gate_bias_init=0") == (
        "deep_global context (gate bias init 0, gate per head)"
    )
    assert arm_words('deep:context_targets=["key"],context_rank=64') == (
        "deep context (context rank 64, context targets key)"
    )
    with pytest.raises(ValueError, match="'gate_bias' is not a context option"):
        arm_words("deep:gate_bias=0")


@pytest.mark.parametrize(
    "text,message",
    [
        ("local", "the variant must be one of none, global, deep, deep_global; got 'local'"),
        ("deep:gate_bias=0", "'gate_bias' is not a context option; those are context_type, "),
        ("deep:gate_bias_init=low", "`gate_bias_init` must be a number in [-20, 20] (a logit); got 'low'"),
        ("deep:gate_per_head=1", "`gate_per_head` must be True or False; got 1"),
        ("deep:context_rank=4,context_rank=8", "sets 'context_rank' twice"),
        (
            "none:gate_per_head",
            "'none' is a twin, without context; it takes only output_gate, output_gate_start, local_bias, "
            "local_layers, local_window, local_bias_start, not gate_per_head",
        ),
    ],
)
def test_a_bad_arm_is_refused_naming_the_value_and_what_is_allowed(text, message):
    with pytest.raises(ValueError, match="arm ") as error:
        parse_arm(text, VARIANTS, option_free=("none",))
    assert message in str(error.value)


def test_one_cell_never_pools_records_of_different_options():
    records = [
        {"variant": "deep_global", "seed": 1, "context_options": {"gate_bias_init": -4.0}},
        {"variant": "deep_global", "seed": 2, "context_options": {"gate_bias_init": 0.0}},
        {"variant": "global", "seed": 1},  # recorded before options were: nothing to compare
    ]
    check_cells(records[:1] + records[2:], ("variant",))
    with pytest.raises(ValueError, match=r"records of \{'variant': 'deep_global'\}.*\(gate_bias_init\)"):
        check_cells(records, ("variant",))


def test_both_sweeps_take_arms_and_refuse_a_bad_one(capsys):
    runs = glue_sweep_runs("none", "deep:context_rank=64")
    assert [run.identity["variant"] for run in runs] == ["none", "deep:context_rank=64"]
    (command,) = runs[1].commands
    assert command[command.index("--context_type") + 1 :][:3] == ["deep", "--context_rank", "64"]
    translation = load_script("translation_sweep")
    for sweep, required in (
        (load_script("glue_sweep"), ["--model_name_or_path", "m", "--glue_dir", "g"]),
        (translation, ["--data_dir", "d"]),
    ):
        with pytest.raises(SystemExit):
            sweep.parse_args([*required, "--output_dir", "o", "--arms", "none", "deep:gate_bias_init=x"])
        assert "arm 'deep:gate_bias_init=x': `gate_bias_init` must be a number in [-20, 20]" in capsys.readouterr().err
