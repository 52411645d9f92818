"""The context gates of a study's runs, as their records keep them."""

import json
import statistics
from pathlib import Path

from ..configuration_casan import CasanConfig
from ..context import CONTEXT_KINDS, CONTEXT_TARGETS
from ..hub.gate_log import OUTPUT_GATE_FIGURES, gate_key, logged_layers_and_heads, output_gate_key
from .arms import parse_arm


def final_gates(trainer_state):
    """The mean query and key gate of every layer (`{"query": [...], "key": [...]}`) at the last evaluation
    logged in a `trainer_state.json` by `GateMonitor`, and with a gate per head each head's (`"query_per_head"`,
    `"key_per_head"`: per layer, a list over the heads), with an output gate its mean and share under 0.1 per layer
    (`"output_mean"`, `"output_sparse"`); None when no gates were logged (a model without context)."""
    trainer_state = Path(trainer_state)
    if not trainer_state.exists():
        return None
    for entry in reversed(json.loads(trainer_state.read_text())["log_history"]):
        layers, heads = logged_layers_and_heads(entry)
        if not layers:
            continue
        gates = {target: [entry[gate_key(layer, target)] for layer in layers] for target in CONTEXT_TARGETS}
        for target in CONTEXT_TARGETS if heads else ():
            gates[f"{target}_per_head"] = [
                [entry[gate_key(layer, target, head)] for head in heads] for layer in layers
            ]
        if output_gate_key(layers[0], "mean") in entry:
            for figure in OUTPUT_GATE_FIGURES:
                gates[f"output_{figure}"] = [entry[output_gate_key(layer, figure)] for layer in layers]
        return gates
    return None


def context_options(record):
    """The context options of a record's model: its `context_options`, or, in a record made before they were kept,
    those its arm's name spells (the rest at their defaults)."""
    options = record.get("context_options")
    if options is None:
        arm = parse_arm(record["variant"], tuple(CONTEXT_KINDS))
        options = {"context_type": arm.variant, **dict(arm.options)}
    return options


def context_config(record):
    """The context options of a record's model as a `CasanConfig` of its encoder's depth."""
    return CasanConfig(num_hidden_layers=len(record["gates"]["query"]), **context_options(record))


def mean_gates(records):
    """`query / key`: the final gate, mean over the runs and over the layers and targets that have context by
    each run's config. A gate of a layer with context counts however far it closed; a layer or target without
    context (deep's first layer) has no gate, though it is logged as 0."""
    values = {target: [] for target in CONTEXT_TARGETS}
    for record in records:
        if not record["gates"]:
            continue
        config = context_config(record)
        for target in config.context_targets:
            gates = record["gates"][target]
            values[target] += [gate for layer, gate in enumerate(gates) if config.layer_has_context(layer)]
    if not any(values.values()):
        return "-"
    return " / ".join(f"{statistics.mean(values[t]):.3f}" if values[t] else "-" for t in CONTEXT_TARGETS)


def has_output_gate(record):
    """Whether a record's run logged an output gate (`final_gates`' `"output_mean"`)."""
    return bool(record["gates"]) and "output_mean" in record["gates"]


def mean_output_gates(records):
    """`mean / share under SPARSE_BELOW` of the final output gate, over the runs and every layer; "-" without one."""
    gates = [record["gates"] for record in records if has_output_gate(record)]
    if not gates:
        return "-"
    means = [value for gate in gates for value in gate["output_mean"]]
    sparse = [value for gate in gates for value in gate["output_sparse"]]
    return f"{statistics.mean(means):.3f} / {statistics.mean(sparse):.3f}"
