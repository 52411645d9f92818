"""Launched by tests/test_scaling.py under torchrun with two CPU processes (gloo): trains each saved tiny CASAN
folder a few steps with `Trainer`, once as transformers' FSDP2 loads it (`from_pretrained(...,
distributed_config=DistributedConfig(fsdp_size=2))`) and once under DDP, from the same weights and batches.

    python -m torch.distributed.run --nproc_per_node 2 tests/sharded_training.py <cases.json>

cases.json lists `{"folder", "model_class", "steps"}` (a class name of casan_hf or of its modeling_casan). For
each case, rank 0 writes `<folder>/runs.json`: the losses and gradient norms of both runs, and the DDP model's
inputs and outputs on a batch after training; each run's model is saved with `Trainer.save_model` in
`<folder>/fsdp` and `<folder>/ddp`.
"""

import json
import os
import sys
from pathlib import Path

import torch
from tiny_models import head_inputs, padded_batch
from torch.distributed.fsdp import FSDPModule
from transformers import DistributedConfig, Trainer, TrainingArguments

import casan_hf
from casan_hf import modeling_casan


def examples(model_class, vocab_size, count=8):
    """`count` single examples of the head's inputs (a translation's labels: the source reversed), of different
    lengths padded to one width."""
    input_ids, attention_mask = padded_batch([8 - index % 5 for index in range(count)], vocab_size, seed=1)
    batch = head_inputs(model_class, input_ids, attention_mask)
    if issubclass(model_class, casan_hf.CasanMarianMTModel):
        batch["labels"] = input_ids.flip(1).masked_fill(attention_mask.flip(1) == 0, -100)
    return [{name: tensor[index] for name, tensor in batch.items()} for index in range(count)]


def train(folder, model_class, steps, sharded):
    """Trains the folder's model for `steps` steps of 2 examples a process; returns the trainer."""
    kwargs = {"distributed_config": DistributedConfig(fsdp_size=2)} if sharded else {}
    model = model_class.from_pretrained(folder, **kwargs)
    assert sharded == isinstance(model, FSDPModule), type(model)
    args = TrainingArguments(
        output_dir=str(Path(folder) / ("fsdp" if sharded else "ddp")),
        max_steps=steps,
        per_device_train_batch_size=2,
        optim="sgd",  # Adam would turn rounding-level differences of near-zero gradients into whole steps
        learning_rate=0.5,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        ddp_backend="gloo",
        dataloader_pin_memory=False,
        seed=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=examples(model_class, model.config.vocab_size))
    trainer.train()
    trainer.save_model()
    return trainer


def main():
    for case in json.loads(Path(sys.argv[1]).read_text()):
        runs = {}
        for name, sharded in (("ddp", False), ("fsdp", True)):
            model_class = getattr(casan_hf, case["model_class"], None) or getattr(modeling_casan, case["model_class"])
            trainer = train(case["folder"], model_class, case["steps"], sharded)
            history = trainer.state.log_history
            runs[name] = {
                "loss": [entry["loss"] for entry in history if "loss" in entry],
                "grad_norm": [entry["grad_norm"] for entry in history if "grad_norm" in entry],
            }
            model = trainer.model.eval()
            if model.config.is_encoder_decoder:  # sharded, every process generates: each step gathers weights
                inputs = trainer.data_collator(examples(type(model), model.config.vocab_size)[:2])
                del inputs["labels"]
                generated = model.generate(**inputs, max_new_tokens=4, num_beams=2, do_sample=False)
                runs[name]["generated"] = generated.tolist()
            if not sharded:
                batch = trainer.data_collator(examples(type(model), model.config.vocab_size)[:4])
                with torch.no_grad():
                    outputs = model(**batch)
                runs["ddp_inputs"] = {key: value.tolist() for key, value in batch.items()}
                runs["ddp_outputs"] = {key: value.tolist() for key, value in outputs.items() if torch.is_tensor(value)}
        if int(os.environ["RANK"]) == 0:
            (Path(case["folder"]) / "runs.json").write_text(json.dumps(runs))
    # The process group ends before the interpreter does: a rank left to tear it down at exit aborted once on a
    # loaded machine ("terminate called without an active exception"), after its last case had been written.
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
