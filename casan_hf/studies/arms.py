"""A study's arms: each a variant (a context type, or a sweep's own variant such as GLUE's `baseline`) and the
context options it sets, e.g. `deep_global` as the authors' code starts it, `gate_bias_init=0` and
`gate_per_head=True`.

On the command line an arm is `VARIANT[:OPTION=VALUE,...]` (`deep_global:gate_bias_init=0,gate_per_head=true`;
a bare `OPTION` means `OPTION=true`). Each value is checked by the option's own check, as `CasanConfig` would, so a
sweep with a bad arm stops before it runs anything. An arm's `name`, the variant with its options in one canonical
order and spelling, is the `variant` of its runs' identity: runs with other options never share a name, a table
row, or a pairing with the twin.
"""

import argparse
import json
from dataclasses import dataclass

from ..context import CONTEXT_KINDS
from ..options import OPTION_CHECKS, option_names


CONTEXT_OPTIONS = option_names("context")
# The options that shape a CASAN model without context (context_type "none"): its output gate, from the token alone,
# and its local bias, from the query.
CONTEXT_FREE_OPTIONS = (
    "output_gate",
    "output_gate_start",
    "local_bias",
    "local_layers",
    "local_window",
    "local_bias_start",
)


def study_variants(twins):
    """The variants a sweep's arms start from, in its tables' order: its `twins` (the variants without context),
    then each kind of `CONTEXT_KINDS` as it is now (a kind added at run time included)."""
    return (*twins, *(context_type for context_type in CONTEXT_KINDS if context_type not in twins))


@dataclass(frozen=True)
class Arm:
    variant: str
    options: tuple = ()  # ((option name, checked value), ...), sorted by name

    @property
    def name(self):
        """`variant`, or `variant:name=value,...` with the values as JSON (`0.0`, `true`, `["key"]`)."""
        if not self.options:
            return self.variant
        return f"{self.variant}:" + ",".join(f"{name}={json.dumps(value)}" for name, value in self.options)

    def flags(self):
        """The options as flags of the training scripts (`casan_hf.cli.CasanArguments`)."""
        flags = []
        for name, value in self.options:
            values = value if isinstance(value, list) else [value]
            flags += [f"--{name}", *(json.dumps(item) if not isinstance(item, str) else item for item in values)]
        return flags


def _value(text):
    """A flag's text as the JSON value it spells (`0`, `-4.5`, `true`, `["key"]`), else as the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_arm(text, variants, option_free=()):
    """The `Arm` that `text` spells; a ValueError naming what is wrong and what is allowed. `variants`: the variants
    a sweep knows; `option_free`: the twins, which have no context to shape (one that is a context kind, `none`,
    takes the `CONTEXT_FREE_OPTIONS`)."""
    variant, _, spelled = text.partition(":")
    if variant not in variants:
        raise ValueError(f"arm {text!r}: the variant must be one of {', '.join(variants)}; got {variant!r}.")
    options = {}
    for item in spelled.split(",") if spelled else ():
        name, has_value, value = item.partition("=")
        if name not in CONTEXT_OPTIONS:
            raise ValueError(
                f"arm {text!r}: {name!r} is not a context option; those are {', '.join(CONTEXT_OPTIONS)}."
            )
        if name in options:
            raise ValueError(f"arm {text!r} sets {name!r} twice.")
        try:
            options[name] = OPTION_CHECKS[name](_value(value) if has_value else True)
        except ValueError as error:
            raise ValueError(f"arm {text!r}: {error}") from None
    if variant in option_free:
        allowed = CONTEXT_FREE_OPTIONS if variant in CONTEXT_KINDS else ()
        refused = [name for name in options if name not in allowed]
        if refused:
            takes = f"only {', '.join(allowed)}" if allowed else "no options"
            raise ValueError(
                f"arm {text!r}: {variant!r} is a twin, without context; it takes {takes}, not {', '.join(refused)}."
            )
    return Arm(variant, tuple(sorted(options.items())))


def option_words(name, value):
    """One context option of an arm in words, from its name and checked value: `gate per head` (true), `no context
    targets` (false, None or empty), `gate bias init 0`, `output gate elementwise`, `context targets query and
    key`."""
    words = name.replace("_", " ")
    if value is True:
        return words
    if value is False or value is None or value == []:
        return f"no {words}"
    if isinstance(value, list):
        return f"{words} {' and '.join(map(str, value))}"
    return f"{words} {value:g}" if isinstance(value, float) else f"{words} {value}"


def arm_words(name):
    """The arm `name` (an `Arm.name`, as a record's `variant` spells it) in words, for a reader rather than a
    command line: its context (`global context`; `no context` for the kind without; a sweep's own twin, such as
    GLUE's `baseline`, by its name), then in brackets each option it sets (`option_words`), as `parse_arm` reads
    them: `global context (no context targets, output gate elementwise, output gate context)`."""
    variant = name.partition(":")[0]
    arm = parse_arm(name, (variant,))
    if variant not in CONTEXT_KINDS:
        context = variant
    elif CONTEXT_KINDS[variant].gives_context:
        context = f"{variant} context"
    else:
        context = "no context"
    if not arm.options:
        return context
    return f"{context} ({', '.join(option_words(option, value) for option, value in arm.options)})"


def arm_argument(variants, option_free=()):
    """An argparse `type` that parses an arm, so that a bad one is a usage error naming it."""

    def parse(text):
        try:
            return parse_arm(text, variants, option_free)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def arm_order(variants):
    """A sort key of arm names: by the position of their variant in `variants`, then by name (the plain arm first)."""

    def key(name):
        variant = name.partition(":")[0]
        return (variants.index(variant) if variant in variants else len(variants), name)

    return key


def check_cells(records, cell_fields):
    """Raises a ValueError where records of one table cell (equal `cell_fields`, e.g. budget, variant) were made
    with different context options (`context_options`, as each run's model had them): a changed default would
    otherwise pool two arms under one name."""
    seen = {}
    for record in records:
        options = record.get("context_options")
        if options is None:
            continue
        cell = tuple(record[name] for name in cell_fields)
        if seen.setdefault(cell, options) != options:
            differing = sorted(name for name in {*options, *seen[cell]} if options.get(name) != seen[cell].get(name))
            raise ValueError(
                f"The records of {dict(zip(cell_fields, cell, strict=True))} were made with different context "
                f"options ({', '.join(differing)}): one cell holds one arm. Give the arms their options explicitly."
            )


__all__ = ["Arm", "CONTEXT_OPTIONS", "arm_argument", "arm_order", "arm_words", "check_cells", "parse_arm"]
