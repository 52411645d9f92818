"""The Hub-ready folder: what `push_to_hub` uploads and what anyone loads with `trust_remote_code=True`: the
folder itself (`folder`), its model card (`card`, one template for every run; `tasks`, what the card's scores
measure), for a converted sentence-transformers model the pipeline beside the encoder (`sentence_transformers`),
what a push sends and the checks it passes (`checks`; `fresh_process`, the process without casan_hf in which the
folder must load), and the commit that uploads it (`push`)."""

from .card import (
    escape_for_card,
    gates_table,
    pinned_load_lines,
    render_model_card,
    render_translation_card,
    untrained_heads,
    untrained_heads_warning,
)
from .folder import MODEL_CARD_NAME, check_output_dir, copy_into, is_hub_id, save_hub_folder, write_model_card
from .sentence_transformers import sentence_transformers_pipeline
from .tasks import METRICS, CardTask, eval_results_for


__all__ = [
    "METRICS",
    "CardTask",
    "MODEL_CARD_NAME",
    "escape_for_card",
    "check_output_dir",
    "copy_into",
    "eval_results_for",
    "gates_table",
    "is_hub_id",
    "pinned_load_lines",
    "render_model_card",
    "render_translation_card",
    "save_hub_folder",
    "sentence_transformers_pipeline",
    "untrained_heads",
    "untrained_heads_warning",
    "write_model_card",
]
