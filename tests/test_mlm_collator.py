"""run_mlm.py's collator on the releases `make test-latest` installs: a resumed run masks its batches as an
uninterrupted run masked them (transformers 5.24 replaces a generator its collator does not know to be the
process's own, `_generator_pid`, with one of the seed alone, which masked the first batch after a resume
otherwise)."""

import pytest
import torch
from conftest import load_script
from transformers import AutoTokenizer


@pytest.fixture(scope="module")
def collator(minilm_path):
    run_mlm = load_script("run_mlm")
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    return lambda: run_mlm.MaskOnceCollator(tokenizer, mlm_probability=0.5, seed=7), tokenizer


def test_a_resumed_collator_masks_the_batches_of_an_uninterrupted_one(collator):
    make, tokenizer = collator
    examples = [tokenizer(f"sentence {i} of the masked text", return_special_tokens_mask=True) for i in range(4)]
    uninterrupted = make()
    batches = [uninterrupted(examples) for _ in range(3)]
    assert not torch.equal(batches[1]["labels"], batches[2]["labels"])  # each batch has masks of its own
    resumed = make()
    resumed.resume_at(2)
    batch = resumed(examples)
    assert torch.equal(batch["input_ids"], batches[2]["input_ids"])
    assert torch.equal(batch["labels"], batches[2]["labels"])
