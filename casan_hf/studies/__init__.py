"""Studies: grids of runs with a results file (`grid`), arms (`arms`), the paired comparison with the twin
(`paired`), its figure (`figure`), the gates the runs end with (`gates`), and each sweep's records and tables
(`glue`, `translation`). The sweep scripts make the runs' commands and read these; the repository's own committed
studies, and the docs and cards rendered from their records, are its tooling (`tooling/`), not the package's."""

from .arms import CONTEXT_OPTIONS, Arm, arm_argument, arm_order, arm_words, check_cells, parse_arm, study_variants
from .figure import paired_figure
from .gates import final_gates, mean_gates
from .grid import (
    Run,
    SettingsMismatch,
    add_sweep_arguments,
    load_results,
    parse_grid_args,
    run_study,
    run_sweep,
    start_or_resume,
    write_atomically,
)
from .paired import (
    Comparison,
    beyond_the_spread,
    detectable_difference,
    mean_std,
    paired,
    paired_interval,
    paired_table,
    won,
)


__all__ = [
    "Arm",
    "CONTEXT_OPTIONS",
    "Comparison",
    "Run",
    "SettingsMismatch",
    "add_sweep_arguments",
    "arm_argument",
    "arm_order",
    "arm_words",
    "beyond_the_spread",
    "check_cells",
    "detectable_difference",
    "final_gates",
    "load_results",
    "mean_gates",
    "mean_std",
    "paired",
    "paired_figure",
    "paired_interval",
    "paired_table",
    "parse_grid_args",
    "parse_arm",
    "run_study",
    "run_sweep",
    "start_or_resume",
    "study_variants",
    "won",
    "write_atomically",
]
