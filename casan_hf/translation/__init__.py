"""Translation runs (`scripts/run_translation.py`): parallel data (`data`), a joint subword tokenizer
(`tokenizer`), model sizes (`sizes`), and scores (`scores`). The run's model card is
the Hub folder's (`casan_hf.hub.render_translation_card`, also importable from here)."""

from ..hub import render_translation_card
from .data import SPLITS, ParallelData, load_parallel_data
from .scores import LENGTH_BUCKETS, bucket_name, scores_by_source_length, token_cross_entropy, translation_scores
from .sizes import MODEL_SIZES, model_config_kwargs
from .tokenizer import train_tokenizer


__all__ = [
    "LENGTH_BUCKETS",
    "MODEL_SIZES",
    "ParallelData",
    "SPLITS",
    "bucket_name",
    "load_parallel_data",
    "model_config_kwargs",
    "render_translation_card",
    "scores_by_source_length",
    "token_cross_entropy",
    "train_tokenizer",
    "translation_scores",
]
