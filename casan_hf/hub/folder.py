"""The Hub-ready folder that every script writes: weights (safetensors), config with `auto_map`, the model's code
files, the tokenizer and a model card `README.md`. An existing non-empty folder is never written into unless the
caller says so, and that is checked before any work starts."""

import os
import shutil

from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id


MODEL_CARD_NAME = "README.md"
# The record of what a run received (`cli.run_start`), written into its output folder and never pushed: it holds
# the command line, with this machine's paths.
RUN_START_NAME = "run_start.json"


def is_hub_id(name):
    """Whether `name` can stand in `base_model`: a repo id as huggingface_hub validates it (so no `./x`, `../x`
    or absolute path), and not a local folder."""
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return name is not None and not os.path.isdir(name)


def check_output_dir(output_dir, overwrite=False, flag="overwrite=True"):
    """Raises a ValueError when `output_dir` holds files and `overwrite` is not set."""
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise ValueError(f"Output path {output_dir!r} exists and is not a folder.")
    if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
        raise ValueError(
            f"Output folder {output_dir!r} already exists and is not empty; pass {flag} to write into it anyway."
        )


def write_model_card(output_dir, card_text):
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, MODEL_CARD_NAME), "w", encoding="utf-8") as handle:
        handle.write(card_text)


def save_hub_folder(output_dir, model, tokenizer, card_text, overwrite=False):
    """Writes model, tokenizer and model card into `output_dir` (checked empty unless `overwrite`)."""
    check_output_dir(output_dir, overwrite)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    write_model_card(output_dir, card_text)


def copy_into(paths, output_dir):
    """Copies files and folders into `output_dir`, keeping their names; returns the names."""
    for path in paths:
        target = os.path.join(output_dir, os.path.basename(path))
        if os.path.isdir(path):
            shutil.copytree(path, target, dirs_exist_ok=True)
        else:
            shutil.copy(path, target)
    return [os.path.basename(path) for path in paths]
