"""Compiled steps stay compiled: every family's model of each head the scripts train with Trainer (sequence
classification in run_glue.py, masked LM in run_mlm.py, translation in run_translation.py), and BERT's other
heads with a loss, compile whole (`fullgraph=True`: no graph break), in training (forward and backward) and in
evaluation, and batches of one padded shape reuse the graph (no recompile), whatever their padding. Every
context type is among them."""

import pytest
import torch
from test_translation_model import TINY_MARIAN
from tiny_models import head_inputs, padded_batch, tiny_config
from torch._dynamo.testing import CompileCounterWithBackend

from casan_hf import CONTEXT_KINDS, FAMILIES, CasanMarianConfig, CasanMarianMTModel, casan_class


# (family, head), each with a context type: every family for both heads, the translation model, and BERT's
# other heads that train with a loss; every context type among them.
TRAINER_MODELS = [
    *((family.name, "sequence-classification") for family in FAMILIES),
    *((family.name, "masked-lm") for family in FAMILIES),
    ("marian", "translation"),
    *(("bert", head) for head in ("token-classification", "question-answering", "multiple-choice")),
]
KINDS = tuple(CONTEXT_KINDS)
CASES = [(family, head, KINDS[index % len(KINDS)]) for index, (family, head) in enumerate(TRAINER_MODELS)]


def model_and_batches(family, head, context_type):
    """A tiny model (problem_type set, as run_glue.py sets it) and two batches of one padded shape with different
    padding."""
    torch.manual_seed(0)
    lengths = ([6, 3], [4, 6])
    if family == "marian":
        sizes = {**TINY_MARIAN, "encoder_layers": 2, "decoder_layers": 1}
        config = CasanMarianConfig(**sizes, context_type=context_type)
        model = CasanMarianMTModel(config)
        batches = []
        for seed, row_lengths in enumerate(lengths):
            input_ids, attention_mask = padded_batch(row_lengths, vocab_size=60, seed=seed)
            labels = input_ids.flip(1).masked_fill(attention_mask.flip(1) == 0, -100)
            batches.append({"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels})
        return model, batches
    config = tiny_config(
        family,
        context_type=context_type,
        num_hidden_layers=2,
        num_labels=2,
        problem_type="single_label_classification",
    )
    model_class = casan_class(family, head)
    batches = [head_inputs(model_class, *padded_batch(row, seed=seed)) for seed, row in enumerate(lengths)]
    return model_class(config), batches


@pytest.mark.parametrize(("family", "head", "context_type"), CASES)
def test_training_and_evaluation_compile_whole_once_per_padded_shape(family, head, context_type):
    model, batches = model_and_batches(family, head, context_type)
    assert context_type in CONTEXT_KINDS and batches[0]["input_ids"].shape == batches[1]["input_ids"].shape
    for training, backend in ((True, "aot_eager"), (False, "eager")):  # aot_eager traces the backward as well
        torch._dynamo.reset()
        counter = CompileCounterWithBackend(backend)
        compiled = torch.compile(model.train(training), backend=counter, fullgraph=True)  # a break raises
        for batch in batches:
            with torch.set_grad_enabled(training):
                loss = compiled(**batch).loss
            if training:
                loss.backward()
        assert counter.frame_count == 1, f"{counter.frame_count} graphs for {'training' if training else 'eval'}"
    torch._dynamo.reset()
