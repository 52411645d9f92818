"""The CASAN options on the command line: one dataclass, `CasanArguments`, that every script hands to
`HfArgumentParser`.

It is derived from `options.OPTIONS` (names, help, choices) and `CasanConfig` (types and
defaults), so a new option is one row of that table. Every flag defaults to None, "not given", so that a
CASAN checkpoint that is continued keeps its own values and a converted BERT gets `CasanConfig`'s defaults.
Values are checked when the arguments are parsed, by the config's own checks.
"""

import argparse
import dataclasses
import types
import typing

from ..configuration_casan import option_defaults, option_types
from ..options import OPTION_CHECKS, OPTIONS


class PositiveInt(int):
    """The command-line type of the integer options, all of which are positive counts (rank, hops, width)."""

    def __new__(cls, text):
        value = int(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
        return super().__new__(cls, value)


def _flag_type(annotation):
    """`T | None` for the config's annotation `T` or `T | None`; ints are parsed as positive counts."""
    if isinstance(annotation, types.UnionType):
        (annotation,) = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    return (PositiveInt if annotation is int else annotation) | None


def _field(option, default, annotation):
    metadata = {"help": f"{option.help} Not given: a CASAN checkpoint's own value, else {default!r}."}
    if option.choices is not None:
        metadata["choices"] = option.choices
    return option.name, _flag_type(annotation), dataclasses.field(default=None, metadata=metadata)


def _casan_kwargs(self, *groups):
    """The options given on the command line (of `groups`, or all), as `CasanConfig` keyword arguments."""
    return {
        option.name: getattr(self, option.name)
        for option in OPTIONS
        if getattr(self, option.name) is not None and (not groups or option.group in groups)
    }


def _check_given_options(self):
    for name, value in self.casan_kwargs().items():
        setattr(self, name, OPTION_CHECKS[name](int(value) if isinstance(value, PositiveInt) else value))


_DEFAULTS, _TYPES = option_defaults(), option_types()
CasanArguments = dataclasses.make_dataclass(
    "CasanArguments",
    [_field(option, _DEFAULTS[option.name], _TYPES[option.name]) for option in OPTIONS],
    namespace={"casan_kwargs": _casan_kwargs, "__post_init__": _check_given_options, "__module__": __name__},
)
CasanArguments.__doc__ = "The CASAN options (`options.OPTIONS`) as command-line flags."


__all__ = ["CasanArguments", "PositiveInt"]
