"""What the scripts share: the CASAN options as flags (`arguments`), the optional packages each script checks
before it starts (`extras`), how a run starts and joins its processes (`launch`), resumes (`resume`), picks its
model and data (`run_inputs`) and records what it received (`run_start`).

Only `arguments` is imported here: a script checks its optional packages (`extras`) before anything imports them.
"""

from .arguments import CasanArguments, PositiveInt


__all__ = ["CasanArguments", "PositiveInt"]
