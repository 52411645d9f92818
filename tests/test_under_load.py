"""Inference under load: many threads calling one model (with torch's intra-op threads set, as a server sets them)
and a text-classification pipeline over thousands of varied texts give the outputs of one-by-one calls, and the
process's memory does not grow across repeated rounds (measured, in a bounded loop)."""

import gc
import random
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from tiny_models import tiny_config
from tiny_tokenizer import WORDS, tiny_tokenizer
from transformers import pipeline

from casan_hf import CasanForSequenceClassification


TEXTS = 2000
THREADS = 8
# What a round may add to the resident memory once the first round has warmed every cache: far below the
# ~1 MB a leak of one batch's activations per call would add over a round.
GROWTH_BOUND_MB = 8


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A deep_global CASAN classifier with structured pooling (every per-batch path: masked means, hops) and the
    tiny word-level tokenizer."""
    torch.manual_seed(0)
    config = tiny_config(context_type="deep_global", classifier_pooling="structured", num_labels=3, gate_bias_init=0.0)
    model = CasanForSequenceClassification(config).eval()
    return model, tiny_tokenizer(tmp_path_factory.mktemp("tokenizer"))


def varied_texts(count, seed=0):
    """Texts of 1 to 40 words, punctuation and repeats included."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40))) for _ in range(count)]


def one_by_one(model, tokenizer, texts):
    with torch.no_grad():
        return [model(**tokenizer(text, return_tensors="pt")).logits[0] for text in texts]


def test_threads_calling_one_model_get_one_by_one_outputs(served):
    model, tokenizer = served
    texts = varied_texts(THREADS * 25, seed=1)
    expected = one_by_one(model, tokenizer, texts)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:

        def call(index):
            with torch.no_grad():
                return index, model(**tokenizer(texts[index], return_tensors="pt")).logits[0]

        with ThreadPoolExecutor(THREADS) as pool:
            results = dict(pool.map(call, range(len(texts))))
    finally:
        torch.set_num_threads(threads)
    for index, logits in enumerate(expected):
        torch.testing.assert_close(results[index], logits, atol=1e-6, rtol=1e-5)


def resident_mb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def test_a_pipeline_over_thousands_of_texts_matches_and_does_not_grow(served):
    model, tokenizer = served
    texts = varied_texts(TEXTS)
    classify = pipeline("text-classification", model=model, tokenizer=tokenizer, top_k=None, device="cpu")
    expected = [torch.softmax(logits, -1) for logits in one_by_one(model, tokenizer, texts)]
    resident = []
    for _ in range(3):
        results = classify(texts, batch_size=32)
        gc.collect()
        resident.append(resident_mb())
        for scores, probabilities in zip(results, expected, strict=True):
            by_label = {score["label"]: score["score"] for score in scores}
            got = torch.tensor([by_label[model.config.id2label[i]] for i in range(len(probabilities))])
            torch.testing.assert_close(got, probabilities, atol=1e-5, rtol=1e-4)
    growth = resident[-1] - resident[0]
    assert growth < GROWTH_BOUND_MB, f"resident memory grew by {growth:.1f} MB over two rounds of {TEXTS} texts"
