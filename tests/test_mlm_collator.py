"""run_mlm.py's collator on the releases `make test-latest` installs: a resumed run masks its batches as an
uninterrupted run masked them (transformers 5.24 replaces a generator its collator does not know to be the
process's own, `_generator_pid`, with one of the seed alone, which masked the first batch after a resume
otherwise), and in training, at any dataset size, batch size and gradient accumulation, resumed at every step."""

import math

import pytest
import torch
from conftest import load_script
from datasets import Dataset
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tiny_models import tiny_config
from tiny_tokenizer import tiny_tokenizer
from transformers import AutoTokenizer, TrainingArguments

from casan_hf import CasanForMaskedLM
from casan_hf.training import CasanTrainer


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


# --- in training: a run resumed at any step masks the batches of the unbroken run -------------------------------


class RecordingTrainer(CasanTrainer):
    """A CasanTrainer that keeps every training batch it steps on, with the optimizer step it belongs to."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches = []

    def training_step(self, model, inputs, num_items_in_batch=None):
        self.batches.append((self.state.global_step + 1, inputs["input_ids"].clone(), inputs["labels"].clone()))
        return super().training_step(model, inputs, num_items_in_batch)


@pytest.fixture(scope="module")
def tiny_collator(tmp_path_factory):
    run_mlm = load_script("run_mlm")
    tokenizer = tiny_tokenizer(tmp_path_factory.mktemp("tiny_tokenizer"))
    return lambda: run_mlm.MaskOnceCollator(tokenizer, mlm_probability=0.5, seed=7), tokenizer


def masked_lm_trainer(make_collator, texts, run, output_dir, save_strategy):
    """A tiny CASAN masked LM's trainer for `run` (examples, batch size, accumulation steps, max_steps)."""
    _, batch_size, accumulation, max_steps = run
    torch.manual_seed(0)
    model = CasanForMaskedLM(tiny_config(context_type="global", hidden_dropout_prob=0.1))
    args = TrainingArguments(
        output_dir=str(output_dir),
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation,
        max_steps=max_steps,
        learning_rate=1e-2,
        save_strategy=save_strategy,
        save_steps=1,
        logging_steps=1,
        report_to="none",
        remove_unused_columns=False,
        dataloader_pin_memory=False,
        seed=7,
    )
    return RecordingTrainer(model=model, args=args, train_dataset=texts, data_collator=make_collator())


@st.composite
def masked_lm_runs(draw):
    """(examples, batch size, accumulation steps, max_steps): epochs of at most three optimizer steps, their last
    step short where the batches do not divide by the accumulation (or the examples by the batch size), and runs
    of one to two epochs and a step."""
    batch_size, accumulation = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    examples = draw(st.integers(1, 3 * batch_size * accumulation))
    steps_per_epoch = math.ceil(math.ceil(examples / batch_size) / accumulation)
    return examples, batch_size, accumulation, draw(st.integers(steps_per_epoch + 1, 2 * steps_per_epoch + 1))


@settings(max_examples=max(settings.default.max_examples // 16, 1))
@example(run=(26, 4, 2, 6))  # seven batches, four steps an epoch, the last of one batch: resumed at step 5
@given(run=masked_lm_runs())
def test_a_masked_lm_run_resumed_at_any_step_masks_and_trains_as_the_unbroken_run(
    tiny_collator, tmp_path_factory, run
):
    """For any dataset size, batch size and gradient accumulation, a run resumed from the checkpoint of each of its
    steps in turn steps on the batches, masks included, of the unbroken run, across epochs, and ends with its
    weights, bit for bit (CasanTrainer tells the collator how many batches the steps done drew, by Trainer's own
    epoch arithmetic)."""
    examples, _, _, max_steps = run
    make, tokenizer = tiny_collator
    words = "the film was funny and gripping i liked it not at all".split()
    sentences = [" ".join(words[i % 5 : i % 5 + 2 + i % 4]) for i in range(examples)]
    texts = Dataset.from_dict(dict(tokenizer(sentences, return_special_tokens_mask=True)))
    folder = tmp_path_factory.mktemp("masked_lm_run")
    unbroken = masked_lm_trainer(make, texts, run, folder / "unbroken", "steps")
    unbroken.train()
    weights = {name: tensor.clone() for name, tensor in unbroken.model.state_dict().items()}
    for step in range(1, max_steps + 1):
        resumed = masked_lm_trainer(make, texts, run, folder / f"resumed-{step}", "no")
        resumed.train(resume_from_checkpoint=str(folder / "unbroken" / f"checkpoint-{step}"))
        expected = [batch for batch in unbroken.batches if batch[0] > step]
        assert len(resumed.batches) == len(expected), (run, step)
        for (at, input_ids, labels), (_, expected_ids, expected_labels) in zip(resumed.batches, expected, strict=True):
            assert torch.equal(input_ids, expected_ids) and torch.equal(labels, expected_labels), (run, step, at)
        for name, tensor in resumed.model.state_dict().items():
            assert torch.equal(tensor, weights[name]), (run, step, name)
