"""Every context option is checked wherever it can enter: constructor, attribute, from_pretrained kwargs,
a loaded config.json; and a saved config carries the auto_map for all seven auto classes."""

import dataclasses
import json
import math
import re
import types
import typing

import numpy
import pytest
import transformers
from transformers import AutoConfig, BertConfig, BertModel

from casan_hf import FAMILY_CONFIGS, CasanConfig, CasanForSequenceClassification, CasanMarianConfig, CasanModel
from casan_hf.cli import CasanArguments, PositiveInt
from casan_hf.families import FAMILIES, get_family
from casan_hf.options import (
    OPTION_CHECKS,
    OPTION_GROUPS,
    OPTION_KINDS,
    OPTION_ROWS,
    OPTIONS,
    CasanOption,
    option_names,
)


AUTO_MAP = get_family("bert").auto_map()


TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37)

INVALID = [
    ("context_type", "local", "context_type"),
    ("context_type", None, "context_type"),
    ("context_type", ["global"], "context_type"),
    ("context_type", {"global": 1}, "context_type"),
    ("context_targets", ["query", "value"], "'value'"),
    ("context_targets", "query", "context_targets"),
    ("context_targets", ["key", "key"], "context_targets"),
    ("context_layers", [], "context_layers"),
    ("context_layers", [0, -1], "context_layers"),
    ("context_layers", [1, 1], "context_layers"),
    ("context_layers", "0", "context_layers"),
    ("gate", "sigmoid", "gate"),
    ("fixed_gate", 1.5, "fixed_gate"),
    ("fixed_gate", -0.1, "fixed_gate"),
    ("fixed_gate", "0.5", "fixed_gate"),
    ("gate_bias_init", float("nan"), "gate_bias_init"),
    ("gate_bias_init", "low", "gate_bias_init"),
    ("gate_per_head", "yes", "gate_per_head"),
    ("gate_per_head", 1, "gate_per_head"),
    ("context_rank", 0, "context_rank"),
    ("context_rank", 2.5, "context_rank"),
    ("context_init_range", -1.0, "context_init_range"),
]


def test_defaults_follow_the_paper():
    config = CasanConfig()
    assert config.model_type == "casan_bert"
    assert config.context_type == "deep_global"
    assert config.context_targets == ["query", "key"]
    assert config.context_layers is None
    assert config.gate == "dynamic"
    assert config.context_rank is None
    assert config.auto_map == AUTO_MAP


@pytest.mark.parametrize("name,value,named", INVALID)
def test_constructor_rejects_invalid_values(name, value, named):
    with pytest.raises(ValueError, match=named) as error:
        CasanConfig(**{name: value})
    assert repr(value) in str(error.value) or name in str(error.value)


@pytest.mark.parametrize("name,value,named", INVALID)
def test_assignment_rejects_invalid_values(name, value, named):
    config = CasanConfig()
    with pytest.raises(ValueError, match=named):
        setattr(config, name, value)


def test_a_gate_per_head_needs_the_dynamic_gate():
    with pytest.raises(ValueError, match="`gate_per_head` shapes the dynamic gate; gate='fixed'"):
        CasanConfig(gate="fixed", gate_per_head=True)


def test_a_config_saved_before_gate_per_head_loads_with_the_shared_gate(tmp_path):
    saved = CasanConfig(context_type="global").to_dict()
    del saved["gate_per_head"]
    tmp_path.joinpath("config.json").write_text(json.dumps(saved))
    assert CasanConfig.from_pretrained(tmp_path).gate_per_head is False


def test_error_lists_allowed_values():
    with pytest.raises(ValueError) as error:
        CasanConfig(context_type="local")
    for allowed in ("'global'", "'deep'", "'deep_global'", "'none'", "'local'"):
        assert allowed in str(error.value)


def test_context_targets_are_canonicalised():
    assert CasanConfig(context_targets=("key", "query")).context_targets == ["query", "key"]
    assert CasanConfig(context_targets=["key"]).context_targets == ["key"]


def test_layer_index_out_of_range_is_named():
    with pytest.raises(ValueError, match=r"\[5\].*3 layers"):
        CasanConfig(**TINY, context_layers=[0, 5])


def test_from_pretrained_kwargs_are_validated(tmp_path):
    CasanConfig(**TINY).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="context_type"):
        CasanConfig.from_pretrained(tmp_path, context_type="local")
    with pytest.raises(ValueError, match="gate"):
        CasanModel.from_pretrained(tmp_path, gate="always")


def test_layer_range_is_checked_when_kwargs_are_set_after_init(tmp_path):
    BertModel(BertConfig(**TINY)).save_pretrained(tmp_path)
    # from_pretrained sets kwargs after __init__, so the cross-field check runs when the model is built.
    with pytest.raises(ValueError, match="out of range"):
        CasanModel.from_pretrained(tmp_path, context_layers=[7])


@pytest.mark.parametrize("name,value,named", INVALID[:8] + INVALID[12:14])
def test_bad_config_json_is_rejected(tmp_path, name, value, named):
    CasanConfig(**TINY).save_pretrained(tmp_path)
    path = tmp_path / "config.json"
    data = json.loads(path.read_text())
    data[name] = value
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=named):
        AutoConfig.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match=named):
        CasanForSequenceClassification.from_pretrained(tmp_path)


# The numeric options' ranges, from their rows.
BOUNDS = {option.name: option.bounds for option in OPTIONS if option.bounds is not None}
# What a numeric option needs beside it to be read at all (an option that would do nothing is refused).
READ_WITH = {"local_window": {"local_bias": "fixed"}}


def beyond_bounds(name):
    """Values just outside `name`'s range, and one far outside it (what a mistyped config.json gives)."""
    low, high = BOUNDS[name]
    if isinstance(low, int):
        return [low - 1, high + 1, 10**12]
    return [math.nextafter(low, -math.inf), math.nextafter(high, math.inf), 1e308]


@pytest.mark.parametrize("name", BOUNDS)
def test_numeric_options_are_bounded_on_every_path_and_the_error_states_the_bound(name, tmp_path):
    """Each numeric option's range (its row's `bounds`), its ends taken: beyond it, the constructor of every family's
    config (the translation model's for the context options), `from_pretrained` keyword arguments, a loaded
    config.json and the scripts' flags refuse the value, naming the option and its range."""
    low, high = BOUNDS[name]
    needs = READ_WITH.get(name, {})
    assert getattr(CasanConfig(**needs, **{name: low}), name) == low
    assert getattr(CasanConfig(**needs, **{name: high}), name) == high
    # every config that declares the option (a causal LM's declares the context options only)
    config_classes = [
        config_class
        for config_class in (*FAMILY_CONFIGS.values(), CasanMarianConfig)
        if name in {field.name for field in dataclasses.fields(config_class)}
    ]
    CasanConfig(**TINY, **needs).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    stated = f"`{name}` must be "
    for value in beyond_bounds(name):
        paths = [lambda value=value, config_class=config_class: config_class(**{name: value})
                 for config_class in config_classes]  # fmt: skip
        paths.append(lambda value=value: CasanConfig.from_pretrained(tmp_path, **{name: value}))
        paths.append(lambda value=value: CasanArguments(**{name: value}))
        for path in paths:
            with pytest.raises(ValueError, match=re.escape(stated)) as error:
                path()
            assert OPTION_ROWS[name].range_text in str(error.value)
        (tmp_path / "config.json").write_text(json.dumps({**saved, name: value}))
        with pytest.raises(ValueError, match=re.escape(stated)):
            AutoConfig.from_pretrained(tmp_path)


@pytest.mark.parametrize("name", BOUNDS)
def test_numeric_options_take_numpy_scalars_and_store_python_numbers(name, tmp_path):
    """A NumPy-driven sweep passes `np.int64(8)` or `np.float32(-4.0)`: taken where the Python number is, stored
    as that Python number (config.json holds it), and refused beyond the range like it."""
    low, high = BOUNDS[name]
    scalar = numpy.int64 if isinstance(low, int) else numpy.float32
    config = CasanConfig(**TINY, **READ_WITH.get(name, {}), **{name: scalar(high)})
    assert getattr(config, name) == high and type(getattr(config, name)) is type(high)
    config.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())[name] == high
    with pytest.raises(ValueError, match=re.escape(f"`{name}` must be ")):
        CasanConfig(**{name: scalar(low - 1)})


def test_context_layers_take_numpy_integers():
    layers = CasanConfig(**TINY, context_layers=[numpy.int64(2), numpy.int64(0)]).context_layers
    assert layers == [0, 2] and all(type(index) is int for index in layers)


def test_decoder_configs_are_refused():
    with pytest.raises(ValueError, match="is_decoder"):
        CasanModel(CasanConfig(**TINY, is_decoder=True))


def test_config_round_trip_keeps_every_field(tmp_path):
    config = CasanConfig(
        **TINY,
        context_type="deep",
        context_targets=["key"],
        context_layers=[2, 1],
        gate="fixed",
        fixed_gate=0.25,
        gate_bias_init=-2,
        context_rank=4,
        context_init_range=0.01,
    )
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["auto_map"] == AUTO_MAP
    loaded = AutoConfig.from_pretrained(tmp_path)
    assert isinstance(loaded, CasanConfig)
    for name in (
        "context_type",
        "context_targets",
        "context_layers",
        "gate",
        "fixed_gate",
        "gate_bias_init",
        "context_rank",
        "context_init_range",
    ):
        assert getattr(loaded, name) == getattr(config, name), name
    assert loaded.context_layers == [1, 2]


def test_converted_bert_config_is_a_casan_config(tmp_path):
    BertConfig(**TINY).save_pretrained(tmp_path)
    config = CasanConfig.from_pretrained(tmp_path, context_type="global")
    assert config.model_type == "casan_bert" and config.to_dict()["model_type"] == "casan_bert"
    assert config.context_type == "global" and config.auto_map == AUTO_MAP


def test_the_option_groups_the_scripts_expose_are_exactly_the_checked_options():
    assert sorted(option_names(*OPTION_GROUPS)) == sorted(OPTION_CHECKS)
    assert [field.name for field in dataclasses.fields(CasanArguments)] == [option.name for option in OPTIONS]
    config_fields = {field.name for field in dataclasses.fields(CasanConfig)}
    assert set(OPTION_CHECKS) <= config_fields


def test_an_option_row_builds_its_check_error_and_help_from_its_kind_choices_and_bounds():
    """A row says its choices and range once; its check, its error (the value and what is allowed) and its help
    come from them, and a row that lacks what its kind needs, or has what it does not use, is refused."""
    assert {option.kind for option in OPTIONS} == set(OPTION_KINDS)
    weight = CasanOption("made_up", "context", "number", "A weight.", bounds=(0.0, 2.0), meaning="a weight",
                         none_means="off")  # fmt: skip
    assert weight.check(None) is None and weight.check(numpy.int64(1)) == 1.0 and type(weight.check(1)) is float
    assert weight.documentation == "A weight. Range: [0, 2]."
    with pytest.raises(
        ValueError, match=re.escape("`made_up` must be None (off) or a number in [0, 2] (a weight); got 3.")
    ):
        weight.check(3)
    choice = CasanOption("made_up", "context", "choice", "A choice.", choices=("a", "b"), none_means="off")
    assert choice.documentation == "A choice." and choice.check("b") == "b"
    with pytest.raises(ValueError, match=re.escape("`made_up` must be one of None, 'a', 'b'; got ['a'].")):
        choice.check(["a"])
    for row in (dict(kind="choice"), dict(kind="int"), dict(kind="bool", bounds=(0, 1)), dict(kind="layers"),
                dict(kind="number", bounds=(0, 1), choices=("a",)), dict(kind="list")):  # fmt: skip
        with pytest.raises(ValueError, match="option `made_up`: kind "):
            CasanOption("made_up", "context", help="", **row)


def test_each_flag_takes_the_configs_type_made_optional():
    """CasanArguments is written out; each field's type is its config field's, optional, ints as positive counts."""

    def value_type(annotation):
        if not isinstance(annotation, types.UnionType):
            return annotation
        (value,) = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return value

    # The annotations, not the fields' `type`: HfArgumentParser rewrites a parsed dataclass's field types in place
    # (X | None becomes X), so after a test that parses flags `field.type` no longer says what the class declares.
    config_types = {field.name: field.type for field in dataclasses.fields(CasanConfig)}
    flag_types = typing.get_type_hints(CasanArguments)
    for field in dataclasses.fields(CasanArguments):
        expected = value_type(config_types[field.name])
        assert value_type(flag_types[field.name]) == (PositiveInt if expected is int else expected), field.name
        assert type(None) in typing.get_args(flag_types[field.name]) and field.default is None, field.name


def test_every_head_names_real_transformers_classes_and_pipelines():
    """Each model class against its row: tests/test_model_classes.py."""
    from transformers.pipelines import SUPPORTED_TASKS

    import casan_hf

    for head in casan_hf.HEADS:
        assert hasattr(transformers, head.auto_class), head
        assert head.pipeline_task is None or head.pipeline_task in SUPPORTED_TASKS, head
    for family in FAMILIES:
        assert len(family.auto_map()) == len(casan_hf.HEADS) + 1
        config_class = casan_hf.FAMILY_CONFIGS[family.name]
        assert config_class.__name__ == family.config_class_name and config_class.model_type == family.model_type
        assert getattr(transformers, f"{family.transformers_prefix}Config").model_type == family.name
