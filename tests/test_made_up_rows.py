"""A context kind and a head are rows of their tables: a made-up kind (`CONTEXT_KINDS`) and a made-up head (a row
of `HEADS`, its class written out for every family as a real head's are, each in its family's `FAMILY_CLASSES`, from
which `MODEL_CLASSES` is gathered as at import, and a reading of its own in `READINGS`) run through the model of every
family, the inspection's prediction, the model card and a sweep's dry run with nothing else changed. The test fails
if the code decided by anything but the rows: a kind outside the paper's three taken for no context, a card that
files every head's scores under text classification, a prediction read as labels whatever the head's reading. The
kind's config, model, benchmark and sweep commands are tests/test_context_kinds.py's."""

import importlib
import json

import pytest
import torch
from conftest import load_script
from huggingface_hub import ModelCard
from test_context_kinds import PREVIOUS
from tiny_models import padded_batch, tiny_config
from tiny_tokenizer import tiny_tokenizer
from torch import nn

from casan_hf import families, modeling_casan_auto
from casan_hf.context import CONTEXT_KINDS
from casan_hf.families import FAMILIES, Head
from casan_hf.hub import render_model_card
from casan_hf.inspection import inspect_attention, predict
from casan_hf.inspection.prediction import READINGS, Prediction
from casan_hf.modeling_casan import (
    CasanElectraPreTrainedModel,
    CasanHeadMixin,
    CasanPreTrainedModel,
    CasanRobertaPreTrainedModel,
    CasanSequenceClassifierOutput,
    CasanXLMRobertaPreTrainedModel,
    encoder_extras,
)
from casan_hf.modeling_casan_auto import casan_class
from casan_hf.modeling_casan_deberta_v2 import CasanDebertaV2PreTrainedModel
from casan_hf.modeling_casan_modernbert import CasanModernBertPreTrainedModel


# One score per sentence from its first token: a head CASAN does not have, with a reading of its own.
SCORING = Head(
    "sentence-scoring",
    "ForSentenceScoring",
    "AutoModelForSentenceScoring",
    None,
    prediction="score",
    untrained="its scores are random until it is fine-tuned",
)


def sentence_score(config, tokenizer, inspection, top_k):
    """The made-up head's reading of its logits for one text: the one score."""
    score = float(inspection.logits[0])
    return Prediction(f"scores the sentence {score:.3f}", ("text", "score"), [("this text", score)])


class CasanForSentenceScoring(CasanHeadMixin, CasanPreTrainedModel):
    """A score for each sentence, from the first token's hidden state and one linear layer; the family's base model
    under its prefix, run as every head of every family runs it (`CasanHeadMixin`)."""

    casan_head = SCORING

    def __init__(self, config):
        super().__init__(config)
        setattr(self, self.base_model_prefix, casan_class(self.family, "base")(config))
        self.scorer = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        outputs = self.run_base_model(input_ids, attention_mask, None, None, None, **kwargs)
        scores = self.scorer(outputs.last_hidden_state[:, 0])
        return CasanSequenceClassifierOutput(logits=scores, **encoder_extras(outputs))


class CasanRobertaForSentenceScoring(CasanRobertaPreTrainedModel, CasanForSentenceScoring):
    """`CasanForSentenceScoring` of RoBERTa checkpoints."""


class CasanXLMRobertaForSentenceScoring(CasanXLMRobertaPreTrainedModel, CasanForSentenceScoring):
    """`CasanForSentenceScoring` of XLM-RoBERTa checkpoints."""


class CasanElectraForSentenceScoring(CasanElectraPreTrainedModel, CasanForSentenceScoring):
    """`CasanForSentenceScoring` of ELECTRA checkpoints."""


class CasanModernBertForSentenceScoring(CasanModernBertPreTrainedModel, CasanForSentenceScoring):
    """`CasanForSentenceScoring` of ModernBERT checkpoints."""


class CasanDebertaV2ForSentenceScoring(CasanDebertaV2PreTrainedModel, CasanForSentenceScoring):
    """`CasanForSentenceScoring` of DeBERTa-v2/v3 checkpoints."""


SCORING_CLASSES = (
    CasanForSentenceScoring,
    CasanRobertaForSentenceScoring,
    CasanXLMRobertaForSentenceScoring,
    CasanElectraForSentenceScoring,
    CasanModernBertForSentenceScoring,
    CasanDebertaV2ForSentenceScoring,
)


@pytest.fixture
def made_up_rows(monkeypatch):
    """The made-up kind, head and reading in their tables, as rows added to them would be: each class in its
    family's modeling file's `FAMILY_CLASSES`, and `MODEL_CLASSES` gathered from those as at import."""
    monkeypatch.setitem(CONTEXT_KINDS, PREVIOUS.name, PREVIOUS)
    monkeypatch.setattr(families, "HEADS", (*families.HEADS, SCORING))
    monkeypatch.setitem(READINGS, SCORING.prediction, sentence_score)
    for model_class in SCORING_CLASSES:
        family_classes = importlib.import_module(f"casan_hf.{model_class.family.modeling_module}").FAMILY_CLASSES
        monkeypatch.setitem(family_classes, (model_class.family.name, SCORING.name), model_class)
    monkeypatch.setattr(modeling_casan_auto, "MODEL_CLASSES", modeling_casan_auto.model_classes())


def test_the_made_up_head_has_its_class_in_every_family():
    assert [(model_class.family, model_class.__name__) for model_class in SCORING_CLASSES] == [
        (family, family.class_name(SCORING)) for family in FAMILIES
    ]


@pytest.mark.parametrize("family", FAMILIES, ids=[family.name for family in FAMILIES])
def test_the_made_up_head_and_kind_run_through_the_model_its_prediction_and_its_card(made_up_rows, family, tmp_path):
    torch.manual_seed(0)
    config = tiny_config(family.name, context_type="previous", gate_bias_init=0.0, num_labels=1)
    model = casan_class(family, "sentence-scoring")(config).eval()
    assert type(model).__name__ == family.class_name(SCORING)
    assert config.auto_map[SCORING.auto_class] == f"{family.modeling_module}.{family.class_name(SCORING)}"

    input_ids, attention_mask = padded_batch([6, 3], pad_token_id=config.pad_token_id)
    with torch.no_grad():
        padded = model(input_ids, attention_mask=attention_mask, output_context_gates=True)
        alone = model(input_ids[1:, :3], attention_mask=attention_mask[1:, :3])
    assert padded.logits.shape == (2, 1)
    # The kind's row: layer 0 reads no layer, and each later one the layer before it, so its gates are open.
    real = attention_mask.bool()
    assert torch.all(padded.context_gates[0] == 0)
    assert all(torch.all(gates.transpose(1, 2)[real] != 0) for gates in padded.context_gates[1:])
    torch.testing.assert_close(padded.logits[1], alone.logits[0], atol=1e-5, rtol=1e-5)

    tokenizer = tiny_tokenizer(tmp_path)
    tokenizer.model_input_names = ["input_ids", "attention_mask"]  # ModernBERT takes no token types
    inspection = inspect_attention(model, tokenizer, "the film was funny")
    assert predict(model, tokenizer, inspection).summary == f"scores the sentence {float(inspection.logits[0]):.3f}"

    metrics = {"validation": {"pearson": 0.5}}
    card = render_model_card(
        model, "tiny-scorer", head=SCORING.name, dataset_id="someone/scores", eval_metrics=metrics,
        untrained_heads=["scorer"],
    )  # fmt: skip
    metadata = ModelCard(card).data
    assert metadata.pipeline_tag is None and [result.task_type for result in metadata.eval_results] == [SCORING.name]
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
