"""Model cards that fit the Hub: every card the package writes parses with `huggingface_hub.ModelCard.load` into
the metadata and eval results written, names the checkpoint it started from in `base_model` when that is a Hub
id (the Hub's model tree and "fine-tuned from" links read it) and never a folder of the machine that wrote it,
and shows how to pin a revision. tests/test_hub.py reads the cards of published runs back from a Hub server."""

import ast
import difflib
from pathlib import Path

import pytest
import torch
import transformers
from huggingface_hub import ModelCard
from tiny_models import tiny_config
from transformers import BertConfig, BertForSequenceClassification

import casan_hf.hub
from casan_hf import (
    CasanForMaskedLM,
    CasanForSequenceClassification,
    CasanMarianConfig,
    CasanMarianMTModel,
    __version__,
)
from casan_hf.glue.tasks import GLUE_HUB_ID
from casan_hf.hub import eval_results_for, render_model_card
from casan_hf.translation import render_translation_card


HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
TRAINING = {"learning_rate": 2e-5, "seed": 42}


def cards(folder):
    """(name, card text, metadata base_model expected, eval results expected, whether the card loads remote code)
    of each kind of card: fine-tuned on GLUE (from a Hub id and from a local folder), the plain baseline, the
    masked-LM run, a conversion and a translation run (from scratch and from a local checkpoint)."""
    torch.manual_seed(0)
    classifier = CasanForSequenceClassification(tiny_config(context_type="global", num_labels=2))
    metrics = {"validation": {"accuracy": 0.612345, "f1": 0.7, "loss": 0.69}}
    glue = dict(task_name="rte", dataset_id=GLUE_HUB_ID, eval_metrics=metrics, training=TRAINING)
    glue_results = eval_results_for("rte", GLUE_HUB_ID, metrics)
    baseline = BertForSequenceClassification(BertConfig(**tiny_config().to_diff_dict()))
    perplexity = {"validation": {"perplexity": 12.5}}
    mlm = CasanForMaskedLM(tiny_config(context_type="deep"))
    marian = CasanMarianMTModel(
        CasanMarianConfig(vocab_size=60, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                          decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, pad_token_id=59,
                          decoder_start_token_id=59, eos_token_id=0, context_type="deep")
    )  # fmt: skip
    scores = {"test": {"bleu": 30.123, "chrf": 55.5}}
    translation = ("en", "de", "multi30k (en-de)", scores, TRAINING, "apache-2.0")
    return [
        ("glue from a Hub id", render_model_card(classifier, "you/rte", base_model=HUB_ID, **glue), HUB_ID,
         glue_results, True),
        ("glue from a folder", render_model_card(classifier, "you/rte", base_model=str(folder), **glue), None,
         glue_results, True),
        ("baseline", render_model_card(baseline, "you/rte-baseline", base_model=HUB_ID, **glue), HUB_ID,
         glue_results, False),
        ("masked-lm", render_model_card(mlm, "you/mlm", head="masked-lm", base_model=str(folder),
                                        dataset_id="sentences.txt", eval_metrics=perplexity, training=TRAINING),
         None, eval_results_for(None, "sentences.txt", perplexity, "fill-mask"), True),
        ("conversion", render_model_card(classifier, "you/converted", base_model=HUB_ID), HUB_ID, None, True),
        ("translation from scratch", render_translation_card(marian, "you/mt", *translation), None, "bleu", True),
        ("translation from a folder", render_translation_card(marian, "you/mt", *translation,
                                                              base_model=str(folder)), None, "bleu", True),
        ("translation from a Hub id", render_translation_card(marian, "you/mt", *translation,
                                                              base_model="you/marian-en-de"), "you/marian-en-de",
         "bleu", True),
    ]  # fmt: skip


def test_every_card_parses_into_what_was_written(tmp_path):
    folder = tmp_path / "machine" / "outputs" / "minilm"  # a folder of the machine the card is written on
    folder.mkdir(parents=True)
    for name, text, base_model, eval_results, remote_code in cards(folder):
        (tmp_path / "README.md").write_text(text)
        card = ModelCard.load(tmp_path / "README.md")
        assert card.data.base_model == base_model, name
        if eval_results == "bleu":  # the translation card's own results: BLEU and chrF of the test split
            assert [(r.metric_type, r.metric_value, r.dataset_split) for r in card.data.eval_results] == [
                ("bleu", 30.12, "test"),
                ("chrf", 55.5, "test"),
            ], name
        else:
            assert card.data.eval_results == eval_results, name
        assert str(folder) not in text and "site-packages" not in text, name
        if remote_code:
            assert 'trust_remote_code=True, revision="<commit id>")' in text, name


# The cards whose text is pinned in fixtures/model_cards/: a change to a card's wording shows here as a diff, to be
# made on purpose (write the new text into the fixture).
PINNED_DIR = Path(__file__).parent / "fixtures" / "model_cards"
GATES = {
    f"gates/layer_{layer}/{gate}": layer / 10 + (gate == "key") / 100
    for layer in range(3)
    for gate in ("query", "key")
}
GLUE_TRAINING = {"learning_rate": 2e-5, "context_learning_rate": None, "per_device_train_batch_size": 32, "seed": 42}
MT_TRAINING = {"model_size": "micro", "started_from": None, "learning_rate": 5e-4, "num_beams": 5, "seed": 1}


def pinned_cards():
    """Each kind of card: GLUE with scores and gates, masked-LM from a head the source lacked, a conversion without
    training, translation from scratch and from a Hub id."""
    classifier = CasanForSequenceClassification(tiny_config(context_type="deep_global", num_labels=2))
    marian = CasanMarianMTModel(
        CasanMarianConfig(vocab_size=60, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                          decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, pad_token_id=59,
                          decoder_start_token_id=59, eos_token_id=0, context_type="deep_global")
    )  # fmt: skip
    mrpc = {"validation": {"accuracy": 0.786765, "f1": 0.856655, "loss": 0.51}}
    scores = {"validation": {"bleu": 32.456, "chrf": 58.12}, "test": {"bleu": 31.219, "chrf": 57.5}}
    return {
        "glue": render_model_card(classifier, "you/casan-mrpc", base_model=HUB_ID, task_name="mrpc",
                                  dataset_id=GLUE_HUB_ID, eval_metrics=mrpc, training=GLUE_TRAINING, gates=GATES),
        "masked-lm": render_model_card(CasanForMaskedLM(tiny_config(context_type="deep")), "you/mlm-rte",
                                       head="masked-lm", base_model=HUB_ID, dataset_id="GLUE training sentences: rte",
                                       eval_metrics={"validation": {"perplexity": 12.5}}, training=GLUE_TRAINING,
                                       untrained_heads=["cls.predictions"], gates=GATES),
        "conversion": render_model_card(classifier, "casan", base_model=HUB_ID, untrained_heads=["classifier"]),
        "translation-from-scratch": render_translation_card(marian, "multi30k-deep_global", "en", "de",
                                                            "multi30k (en-de)", scores, MT_TRAINING, "apache-2.0"),
        "translation-from-a-hub-id": render_translation_card(marian, "you/casan-mt", "en", "de", "wmt16",
                                                             {"test": {"bleu": 20.0}},
                                                             {**MT_TRAINING, "started_from": "you/marian-en-de"},
                                                             "mit", base_model="you/marian-en-de"),
    }  # fmt: skip


@pytest.mark.parametrize("name", ["glue", "masked-lm", "conversion", "translation-from-scratch",
                                  "translation-from-a-hub-id"])  # fmt: skip
def test_cards_keep_their_pinned_text(name):
    versions = f"casan-hf {__version__} and transformers {transformers.__version__}."
    text = pinned_cards()[name].replace(versions, "casan-hf VERSION and transformers VERSION.")
    pinned = (PINNED_DIR / f"{name}.md").read_text(encoding="utf-8")
    diff = "".join(difflib.unified_diff(pinned.splitlines(True), text.splitlines(True), "pinned", "rendered"))
    assert text == pinned, diff


def test_the_hub_package_imports_nothing_from_training():
    """The training package writes cards through `casan_hf.hub`; hub reads nothing back from it (the gate log's keys
    are `hub.gate_log`'s), so the imports run one way, in functions as at the top of a module."""
    hub = Path(casan_hf.hub.__file__).parent
    imported = {
        (path.name, node.module or "")
        for path in hub.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
    }
    assert imported and not [(name, module) for name, module in imported if "training" in module.split(".")]
