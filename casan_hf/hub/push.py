"""What goes up to the Hub, and only after it has been checked: `check_folder` refuses a folder that anyone loading
it by repo id would find wanting, naming the file or field, and `push_folder` uploads the folder that passes, in
one commit. `scripts/push_to_hub.py` and the training scripts' `--push_to_hub` (`CasanTrainer.push_to_hub`) both
push through it.

The checks, cheapest first:
- weights in safetensors only: no pickled file (`*.bin`, `*.pt`, ...) but Trainer's `training_args.bin`, which
  holds the run's arguments, not weights;
- `config.json` with an `auto_map`, and every code file that its modules import, relatively, present;
- a model card (`README.md`) whose `base_model` is a Hub id (a translation model trained from scratch has none),
  and whose scores are exactly those of the folder's own results files;
- no text file that names a local path (a folder of this machine or a home folder);
- the folder loads in a fresh process without casan_hf (`trust_remote_code=True`) and gives, on a probe batch, the
  outputs it gives with casan_hf.
"""

import json
import os
import re
import sys
import tempfile
from pathlib import Path

import torch
import transformers
from huggingface_hub import CommitOperationAdd, HfApi, ModelCard
from huggingface_hub.utils import filter_repo_objects

from ..cli.run_start import RUN_START_NAME
from .card import FROM_SCRATCH
from .folder import MODEL_CARD_NAME, is_hub_id
from .fresh_process import run_without_casan_hf
from .tasks import METRICS


# Left out of an upload: Trainer's own patterns (its private files, checkpoints), hidden files (.git, .cache) and
# the record of what a run received (its command line, with this machine's paths), which a study keeps.
IGNORE_PATTERNS = ("_*", "checkpoint-*", ".*", RUN_START_NAME)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
TRAINER_ARGUMENTS = "training_args.bin"
BINARY_SUFFIXES = (".safetensors", *PICKLE_SUFFIXES)
# A results file of the run scripts, and the card split each of its scores belongs to (`_mm`: MNLI mismatched).
RESULTS_FILES = {"eval_results.json": "eval", "predict_results.json": "predict"}
PREFIX_SPLITS = {"eval": ("validation", "validation_matched"), "predict": ("test",)}
# An absolute path of this machine (its first folder exists here), a home folder, or a Windows drive.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~-])/([\w.-]+)/[\w./-]+")
_HOME_OR_DRIVE = re.compile(r"(?<![\w/])(~/[\w.-]+|[A-Za-z]:\\\\?[\w.-]+)")
_RELATIVE_IMPORT = re.compile(r"^\s*from \.(\w+) import", re.MULTILINE)
PROBE_SENTENCES = ["The film was funny and gripping.", "A man is riding a bike down the road."]
PROBE = """
import sys
import torch
import transformers

folder, auto_class, inputs, outputs = sys.argv[1:]
model = getattr(transformers, auto_class).from_pretrained(folder, trust_remote_code=True).eval()
if type(model).__module__.split(".")[0] != "transformers_modules":
    raise SystemExit(f"{auto_class} loaded {type(model).__module__}, not the folder's code")
with torch.no_grad():
    torch.save(model(**torch.load(inputs))[0], outputs)
"""


class FolderCheckError(ValueError):
    """A folder that is not pushed: the message names the file or field and what is wrong with it."""


def upload_files(folder):
    """The files an upload of `folder` sends (paths relative to it, sorted): all but `IGNORE_PATTERNS`."""
    folder = Path(folder)
    listed = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())
    return list(filter_repo_objects(listed, ignore_patterns=list(IGNORE_PATTERNS)))


def check_weights(files):
    pickled = [name for name in files if name.endswith(PICKLE_SUFFIXES) and name != TRAINER_ARGUMENTS]
    if pickled:
        raise FolderCheckError(f"{pickled[0]}: weights go up in safetensors only; save with safe_serialization.")
    if not any(name.endswith(".safetensors") for name in files):
        raise FolderCheckError("model.safetensors: the folder has no safetensors weights.")


def check_code(folder, files):
    """`config.json` with an `auto_map`, and every code file its modules import; returns the config."""
    if "config.json" not in files:
        raise FolderCheckError("config.json: missing.")
    config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    auto_map = config.get("auto_map")
    if not auto_map:
        raise FolderCheckError("config.json: no auto_map, so trust_remote_code finds no code to load.")
    needed = {reference.split(".")[0] for reference in auto_map.values()}
    seen = set()
    while needed - seen:
        module = sorted(needed - seen)[0]
        seen.add(module)
        if f"{module}.py" not in files:
            raise FolderCheckError(f"{module}.py: missing; config.json's auto_map needs it ({sorted(seen)}).")
        code = (Path(folder) / f"{module}.py").read_text(encoding="utf-8")
        needed |= set(_RELATIVE_IMPORT.findall(code))
    return config


def card_scores(card):
    """{(split, metric): value} of a card's model-index."""
    return {(result.dataset_split, result.metric_type): result.metric_value for result in card.data.eval_results or []}


def results_scores(folder, files, splits):
    """{(split, metric): value rounded as a card keeps it} of the folder's results files, for the card's `splits`;
    not those of a split scored on part of its examples (`<prefix>_samples` below `<prefix>_split_samples`), which
    the card keeps out of its model-index."""
    scores = {}
    for name, prefix in RESULTS_FILES.items():
        if name not in files:
            continue
        results = json.loads((Path(folder) / name).read_text(encoding="utf-8"))
        for key, value in results.items():
            metric = key.removeprefix(f"{prefix}_")
            split = next((s for s in PREFIX_SPLITS[prefix] if s in splits), PREFIX_SPLITS[prefix][0])
            suffix = "_mm" if metric.endswith("_mm") else ""
            if suffix:
                metric, split = metric.removesuffix("_mm"), "validation_mismatched"
            total = results.get(f"{prefix}_split_samples{suffix}")
            if metric in METRICS and (total is None or results.get(f"{prefix}_samples{suffix}") == total):
                scores[split, metric] = round(float(value), METRICS[metric].decimals)
    return scores


def check_card(folder, files, config):
    if MODEL_CARD_NAME not in files:
        raise FolderCheckError(f"{MODEL_CARD_NAME}: missing; the model card goes up with the model.")
    card = ModelCard.load(Path(folder) / MODEL_CARD_NAME)
    base_model = card.data.base_model
    if base_model is None and not (config.get("is_encoder_decoder") and FROM_SCRATCH in card.text):
        raise FolderCheckError(
            f"{MODEL_CARD_NAME}: no base_model; name the checkpoint it started from by its Hub id (--base_model)."
        )
    for name in [base_model] if isinstance(base_model, str) else base_model or []:
        if not is_hub_id(name):
            raise FolderCheckError(f"{MODEL_CARD_NAME}: base_model {name!r} is not a Hub id.")
    written = card_scores(card)
    measured = results_scores(folder, files, {split for split, _ in written})
    if written != measured:
        differing = sorted(set(written.items()) ^ set(measured.items()))
        raise FolderCheckError(
            f"{MODEL_CARD_NAME}: its scores {written} are not those of the folder's results files "
            f"({', '.join(name for name in RESULTS_FILES if name in files) or 'none'}: {measured}); "
            f"they differ in {differing}."
        )


def local_paths(text, folder):
    """The local paths `text` names: the folder's own, absolute paths whose first folder exists on this machine,
    home folders and Windows drives."""
    found = [folder] if folder in text else []
    found += [match.group(0) for match in _ABSOLUTE_PATH.finditer(text) if os.path.isdir(f"/{match.group(1)}")]
    return found + _HOME_OR_DRIVE.findall(text)


def check_no_local_paths(folder, files):
    for name in files:
        if name.endswith(BINARY_SUFFIXES):
            continue
        try:
            text = (Path(folder) / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        paths = local_paths(text, str(Path(folder).resolve()))
        if paths:
            raise FolderCheckError(f"{name}: names the local path {paths[0]!r}; a shared folder names none.")


def probe_batch(folder, files, config):
    """The probe inputs: the folder's tokenizer on `PROBE_SENTENCES`, or token ids without one."""
    if "tokenizer_config.json" in files:
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        inputs = dict(tokenizer(PROBE_SENTENCES, padding=True, return_tensors="pt"))
    else:
        generator = torch.Generator().manual_seed(0)
        input_ids = torch.randint(config["vocab_size"], (2, 8), generator=generator)
        inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    if config.get("is_encoder_decoder"):
        inputs["decoder_input_ids"] = inputs["input_ids"]
    return inputs


def auto_class_of(config):
    """The auto class whose `auto_map` entry is the folder's architecture."""
    architecture = (config.get("architectures") or [None])[0]
    for auto_class, reference in config["auto_map"].items():
        if reference.split(".")[-1] == architecture and auto_class != "AutoConfig":
            return auto_class
    raise FolderCheckError(f"config.json: auto_map names no class for its architecture {architecture!r}.")


def check_loads_without_casan_hf(folder, files, config, python=sys.executable):
    folder = str(Path(folder).resolve())
    auto_class = auto_class_of(config)
    inputs = probe_batch(folder, files, config)
    with torch.no_grad():
        model = getattr(transformers, auto_class).from_pretrained(folder).eval()
        expected = model(**inputs)[0]
    with tempfile.TemporaryDirectory() as workdir:
        torch.save(inputs, Path(workdir) / "inputs.pt")
        try:
            run_without_casan_hf(PROBE, workdir, python=python, args=(folder, auto_class, "inputs.pt", "outputs.pt"))
        except RuntimeError as error:
            raise FolderCheckError(f"{auto_class} does not load the folder without casan_hf:\n{error}") from None
        outputs = torch.load(Path(workdir) / "outputs.pt")
    if not torch.allclose(outputs, expected, rtol=1e-4, atol=1e-5):
        raise FolderCheckError(
            f"{auto_class} loaded without casan_hf gives other outputs on the probe batch than with it "
            f"(largest difference {(outputs - expected).abs().max().item():.3g})."
        )


def check_folder(folder):
    """Every check of the module's docstring, in that order; returns the files an upload sends. A
    FolderCheckError names the first file or field that fails."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FolderCheckError(f"{folder}: not a folder.")
    files = upload_files(folder)
    check_weights(files)
    config = check_code(folder, files)
    check_card(folder, files, config)
    check_no_local_paths(folder, files)
    check_loads_without_casan_hf(folder, files, config)
    return files


def push_folder(folder, repo_id, revision=None, private=None, token=None, commit_message="Upload with casan-hf"):
    """Checks `folder` (`check_folder`), then uploads exactly its `upload_files`, in one commit, to `repo_id`
    (created if need be: private if `private`, else as the Hub's default for its owner) on the branch `revision`
    (created from main if need be; None: main). Returns huggingface_hub's `CommitInfo`."""
    files = check_folder(folder)
    api = HfApi(token=token)
    repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id  # "name" is the user's "user/name"
    if revision is not None:
        api.create_branch(repo_id, branch=revision, exist_ok=True)
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(Path(folder) / name)) for name in files]
    return api.create_commit(repo_id, operations, commit_message=commit_message, revision=revision)
