"""The CASAN options on the command line: `CasanArguments`, the dataclass every script hands to
`HfArgumentParser`, one field per row of `options.OPTIONS`.

Each field's help and choices are its option's row; its type is the config's annotation, made optional, with the
integer options parsed as positive counts. Every flag defaults to None, "not given", so that a CASAN checkpoint
that is continued keeps its own values and a converted BERT gets `CasanConfig`'s defaults. Values are checked
when the arguments are parsed, by the config's own checks. A new option is a row of `OPTIONS`, a field of
`CasanConfig` and a field here; `tests/test_config.py` holds the three together.
"""

import argparse
import dataclasses

from ..configuration_casan import option_defaults
from ..options import OPTION_CHECKS, OPTION_ROWS, OPTIONS


class PositiveInt(int):
    """The command-line type of the integer options, all of which are positive counts (rank, hops, width)."""

    def __new__(cls, text):
        value = int(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
        return super().__new__(cls, value)


_DEFAULTS = option_defaults()


def option_flag(name):
    """The field of option `name`: None by default, with its row's help and choices."""
    option = OPTION_ROWS[name]
    metadata = {"help": f"{option.documentation} Not given: a CASAN checkpoint's own value, else {_DEFAULTS[name]!r}."}
    if option.choices is not None:
        metadata["choices"] = option.choices
    return dataclasses.field(default=None, metadata=metadata)


@dataclasses.dataclass
class CasanArguments:
    """The CASAN options (`options.OPTIONS`) as command-line flags."""

    context_type: str | None = option_flag("context_type")
    context_targets: list[str] | None = option_flag("context_targets")
    context_layers: list[int] | None = option_flag("context_layers")
    gate: str | None = option_flag("gate")
    fixed_gate: float | None = option_flag("fixed_gate")
    gate_bias_init: float | None = option_flag("gate_bias_init")
    context_start: str | None = option_flag("context_start")
    gate_per_head: bool | None = option_flag("gate_per_head")
    context_rank: PositiveInt | None = option_flag("context_rank")
    context_init_range: float | None = option_flag("context_init_range")
    output_gate: str | None = option_flag("output_gate")
    output_gate_context: bool | None = option_flag("output_gate_context")
    output_gate_start: str | None = option_flag("output_gate_start")
    local_bias: str | None = option_flag("local_bias")
    local_layers: list[int] | None = option_flag("local_layers")
    local_window: float | None = option_flag("local_window")
    local_bias_start: str | None = option_flag("local_bias_start")
    classifier_pooling: str | None = option_flag("classifier_pooling")
    pooling_hops: PositiveInt | None = option_flag("pooling_hops")
    pooling_hidden: PositiveInt | None = option_flag("pooling_hidden")
    pooling_penalty: float | None = option_flag("pooling_penalty")
    pooling_parameter_penalty: float | None = option_flag("pooling_parameter_penalty")
    pooling_parameter_margin: float | None = option_flag("pooling_parameter_margin")
    pooling_attention_penalty: float | None = option_flag("pooling_attention_penalty")
    pooling_attention_margin: float | None = option_flag("pooling_attention_margin")
    pooling_output_penalty: float | None = option_flag("pooling_output_penalty")
    pooling_output_margin: float | None = option_flag("pooling_output_margin")

    def __post_init__(self):
        for name, value in self.casan_kwargs().items():
            setattr(self, name, OPTION_CHECKS[name](int(value) if isinstance(value, PositiveInt) else value))

    def casan_kwargs(self, *groups):
        """The options given on the command line (of `groups`, or all), as `CasanConfig` keyword arguments."""
        return {
            option.name: getattr(self, option.name)
            for option in OPTIONS
            if getattr(self, option.name) is not None and (not groups or option.group in groups)
        }


def check_positive(arguments, *names, unit="number"):
    """Refuses any of the flags `names` of `arguments` that is given (not None) and not above zero, naming it."""
    for name in names:
        value = getattr(arguments, name)
        if value is not None and value <= 0:
            raise ValueError(f"--{name} must be a positive {unit}; got {value}.")


@dataclasses.dataclass
class EncoderModelArguments:
    """Which checkpoint an encoder run starts from (how a BERT checkpoint is made context-aware: `CasanArguments`);
    each script's `ModelArguments` adds its own fields."""

    model_name_or_path: str = dataclasses.field(
        metadata={"help": "A BERT checkpoint (converted) or a CASAN checkpoint (continued): folder or Hub id."}
    )
    baseline: bool = dataclasses.field(
        default=False,
        metadata={
            "help": "Train the unmodified source model (BertForSequenceClassification, BertForMaskedLM, ...) with "
            "the same settings."
        },
    )
    tokenizer_name: str | None = dataclasses.field(
        default=None, metadata={"help": "Tokenizer, if not the checkpoint's own."}
    )
    cache_dir: str | None = dataclasses.field(
        default=None, metadata={"help": "Where downloaded models and data are stored."}
    )
    base_model: str | None = dataclasses.field(
        default=None,
        metadata={
            "help": "Hub id of the starting checkpoint, for the model card "
            "(default: --model_name_or_path if it is a Hub id)."
        },
    )
    license: str = dataclasses.field(default="apache-2.0", metadata={"help": "License written on the model card."})


@dataclasses.dataclass
class RunDataArguments:
    """The data flags every training script takes alike: how many processes tokenise, and whether a run may write
    into a non-empty output folder (`resume.find_checkpoint` reads it); each script's data arguments add what to
    train on."""

    preprocessing_num_workers: int | None = dataclasses.field(
        default=None, metadata={"help": "Processes for tokenisation."}
    )
    overwrite_output_dir: bool = dataclasses.field(
        default=False, metadata={"help": "Write into a non-empty --output_dir (without it, the run stops)."}
    )
    resume_weights_only: bool = dataclasses.field(
        default=False,
        metadata={
            "help": "Resume from a checkpoint of the model only (--save_only_model): its weights and step, with a "
            "fresh optimizer and the learning-rate schedule from its start (without it, such a resume is refused)."
        },
    )
