"""The context gates of a study's runs, as their records keep them."""

import json
import statistics
from pathlib import Path


def final_gates(trainer_state):
    """The mean query and key gate of every layer (`{"query": [...], "key": [...]}`) at the last evaluation
    logged in a `trainer_state.json` by `GateMonitor`, and with a gate per head each head's (`"query_per_head"`,
    `"key_per_head"`: per layer, a list over the heads); None when no gates were logged (a model without context)."""
    trainer_state = Path(trainer_state)
    if not trainer_state.exists():
        return None
    for entry in reversed(json.loads(trainer_state.read_text())["log_history"]):
        layers = sorted({int(key.split("/")[1].removeprefix("layer_")) for key in entry if key.startswith("gates/")})
        if not layers:
            continue
        gates = {target: [entry[f"gates/layer_{layer}/{target}"] for layer in layers] for target in ("query", "key")}
        heads = sorted({int(key.rsplit("_", 1)[1]) for key in entry if key.startswith("gates/") and "/head_" in key})
        for target in ("query", "key") if heads else ():
            gates[f"{target}_per_head"] = [
                [entry[f"gates/layer_{layer}/{target}/head_{head}"] for head in heads] for layer in layers
            ]
        return gates
    return None


def mean_gates(gates_of_runs):
    """`query / key`: the mean gate over the runs and over the layers with context (a layer without reads 0)."""
    gates = [gates for gates in gates_of_runs if gates]
    if not gates:
        return "-"
    return " / ".join(
        f"{statistics.mean(value for g in gates for value in g[target] if value):.3f}" for target in ("query", "key")
    )
