"""Look inside a model on one text: the context gates, the attention maps and the pooling hops, aligned
with the tokens, for users who want to see (or plot) what the context does.

Works for CASAN models of every family (the encoders' and the causal LMs'), context type and head, and for plain
`transformers` models of the same families (which have no gates and no pooling hops). `predict` reads each head's
output the way its pipeline would (labels, tags, an answer span, the tokens for a mask, the next token after the
text), for titles and the explorer's page.
"""

from .attention import MAX_TOKENS, AttentionInspection, inspect_attention, load_for_inspection
from .heads import checkpoint_head, model_head
from .prediction import Prediction, predict


__all__ = [
    "MAX_TOKENS",
    "AttentionInspection",
    "Prediction",
    "checkpoint_head",
    "inspect_attention",
    "load_for_inspection",
    "model_head",
    "predict",
]
