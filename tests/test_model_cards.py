"""Model cards that fit the Hub: every card the package writes parses with `huggingface_hub.ModelCard.load` into
the metadata and eval results written, names the checkpoint it started from in `base_model` when that is a Hub
id (the Hub's model tree and "fine-tuned from" links read it) and never a folder of the machine that wrote it,
and shows how to pin a revision. tests/test_hub.py reads the cards of published runs back from a Hub server."""

import torch
from huggingface_hub import ModelCard
from tiny_models import tiny_config
from transformers import BertConfig, BertForSequenceClassification

from casan_hf import CasanForMaskedLM, CasanForSequenceClassification, CasanMarianConfig, CasanMarianMTModel
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
