"""A context kind and a head are rows of their tables: a made-up kind (`CONTEXT_KINDS`) and a made-up head (a row
of `HEADS`, its classes written as docs/CODE.md says, and their `MODEL_CLASSES` entries) run through the model, the
inspection's prediction, the model card and a sweep's dry run with nothing else changed. The kind's config, model,
benchmark and sweep commands are tests/test_context_kinds.py's."""

import json

import pytest
import torch
from conftest import load_script
from huggingface_hub import ModelCard
from test_context_kinds import PREVIOUS
from tiny_models import padded_batch, tiny_config
from tiny_tokenizer import tiny_tokenizer
from torch import nn

from casan_hf import families
from casan_hf.context import CONTEXT_KINDS
from casan_hf.families import Head
from casan_hf.hub import render_model_card
from casan_hf.inspection import inspect_attention, predict
from casan_hf.modeling_casan import (
    CasanPreTrainedModel,
    CasanRobertaPreTrainedModel,
    CasanSequenceClassifierOutput,
    encoder_extras,
)
from casan_hf.modeling_casan_auto import MODEL_CLASSES, casan_class


# One score per sentence from its first token: a head CASAN does not have, read as a regression's value.
SCORING = Head(
    "sentence-scoring",
    "ForSentenceScoring",
    "AutoModelForSentenceScoring",
    None,
    prediction="labels",
    untrained="its scores are random until it is fine-tuned",
)


class CasanForSentenceScoring(CasanPreTrainedModel):
    """A score for each sentence, from the first token's hidden state and one linear layer."""

    casan_head = SCORING

    def __init__(self, config):
        super().__init__(config)
        self.build_base_model(config, add_pooling_layer=False)
        self.scorer = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        outputs = self.base_model(input_ids, attention_mask=attention_mask, return_dict=True, **kwargs)
        scores = self.scorer(outputs.last_hidden_state[:, 0])
        return CasanSequenceClassifierOutput(logits=scores, **encoder_extras(outputs))


class CasanRobertaForSentenceScoring(CasanRobertaPreTrainedModel, CasanForSentenceScoring):
    """A score for each sentence, as CasanForSentenceScoring, of RoBERTa checkpoints."""


@pytest.fixture
def made_up_rows(monkeypatch):
    """The made-up kind and head in their tables, as rows added to them would be."""
    monkeypatch.setitem(CONTEXT_KINDS, PREVIOUS.name, PREVIOUS)
    monkeypatch.setattr(families, "HEADS", (*families.HEADS, SCORING))
    for model_class in (CasanForSentenceScoring, CasanRobertaForSentenceScoring):
        monkeypatch.setitem(MODEL_CLASSES, (model_class.family.name, SCORING.name), model_class)


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_the_made_up_head_and_kind_run_through_the_model_its_prediction_and_its_card(made_up_rows, family, tmp_path):
    torch.manual_seed(0)
    config = tiny_config(family, context_type="previous", gate_bias_init=0.0, num_labels=1)
    model = casan_class(family, "sentence-scoring")(config).eval()
    assert config.auto_map["AutoModelForSentenceScoring"] == f"modeling_casan.{type(model).__name__}"

    input_ids, attention_mask = padded_batch([6, 3], pad_token_id=config.pad_token_id)
    with torch.no_grad():
        padded = model(input_ids, attention_mask=attention_mask, output_context_gates=True)
        alone = model(input_ids[1:, :3], attention_mask=attention_mask[1:, :3])
    assert padded.logits.shape == (2, 1) and torch.all(padded.context_gates[0] == 0)  # layer 0 reads no layer
    torch.testing.assert_close(padded.logits[1], alone.logits[0], atol=1e-5, rtol=1e-5)

    tokenizer = tiny_tokenizer(tmp_path)
    inspection = inspect_attention(model, tokenizer, "the film was funny")
    assert predict(model, tokenizer, inspection).summary == f"predicts {float(inspection.logits[0]):.3f}"

    card = render_model_card(model, "tiny-scorer", head="sentence-scoring", untrained_heads=["scorer"])
    assert ModelCard(card).data.pipeline_tag is None
    assert "A context-aware self-attention ('previous' context) version of" in card
    assert "| context_type | `previous` |" in card and "classifier_pooling" not in card
    assert "from transformers import AutoTokenizer, AutoModelForSentenceScoring" in card
    assert "the sentence-scoring head starts random, so its scores are random until it is fine-tuned." in card


def test_a_sweeps_dry_run_takes_the_made_up_kind_as_an_arm(made_up_rows, tmp_path, capsys):
    sweep = load_script("glue_sweep")
    results = tmp_path / "results.json"
    flags = ["--model_name_or_path", "m", "--glue_dir", "g", "--output_dir", str(tmp_path), "--results", str(results),
             "--tasks", "rte", "--arms", "none", "previous", "--classifier_pooling", "mean", "--seeds", "1", "2",
             "--dry_run"]  # fmt: skip
    runs = sweep.study_runs(sweep.parse_args(flags))
    finished = [run for run in runs if run.identity["seed"] == 1]
    records = [
        {**run.identity, "settings": run.settings, "eval_accuracy": 0.5 + 0.1 * index, "gates": None}
        for index, run in enumerate(finished)
    ]
    results.write_text(json.dumps(records))
    sweep.main(flags)
    out = capsys.readouterr().out
    assert "4 runs: 2 finished before, 2 to run" in out
    (to_run,) = [line for line in out.splitlines() if "--context_type previous" in line]  # seed 1's is recorded
    assert "--seed 2 " in to_run
    assert "| previous |" in results.with_suffix(".md").read_text()
