"""What goes up to the Hub, and only after it has been checked: `check_folder` refuses a folder that anyone loading
it by repo id would find wanting, naming the file or field in one line, and `push_folder` makes the repository's
branch hold exactly the folder's files, in one commit. `scripts/push_to_hub.py` and the training scripts'
`--push_to_hub` (`CasanTrainer.push_to_hub`) both push through it.

The file list is decided once (`upload_files`), and the files are copied into a staging folder (`staged`) that
every check reads and the upload sends: what is sent is what was checked. The checks, cheapest first:
- the files: no symbolic link (its bytes would come from outside the folder), no file over `MAX_FILE_BYTES`
  unless allowed, no file that unpickles when loaded, wherever it sits; hidden files and folders, Trainer's
  private files and the run record are left out (`LEFT_OUT`);
- every JSON file parses, every safetensors file reads, and the weights are safetensors;
- `config.json` with an `auto_map`, and every code file that its modules import, relatively, present (a
  `--baseline` run's model is transformers' own and needs no code);
- a model card (`README.md`) whose metadata parses, whose `base_model` is a Hub id (a translation model trained
  from scratch has none), whose scores are those of every results file of the folder, whose load examples name the
  repository pushed to, and which shows no tokenizer the folder lacks;
- no text file that names a local path (a folder of this machine, a home folder, a Windows drive);
- the folder loads in a fresh process without casan_hf: every `auto_map` entry resolves to a class of the folder's
  code, and the architecture's auto class gives, on a probe batch, the outputs it gives with casan_hf.
Before the repository is created the Hub validates the card's metadata (`ModelCard.validate`: licence, pipeline
tag, model-index).
"""

import json
import os
import re
import shutil
import stat
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from fnmatch import fnmatch
from hashlib import sha256
from pathlib import Path
from typing import NamedTuple

import numpy
import safetensors
import torch
import transformers
import yaml
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, ModelCard
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.utils import filter_repo_objects
from huggingface_hub.utils.sha import git_hash
from transformers.dynamic_module_utils import get_relative_import_files
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

from ..cli.run_start import RUN_START_NAME
from ..families import HEADS
from .card import FROM_SCRATCH
from .folder import MODEL_CARD_NAME, is_hub_id
from .fresh_process import run_without_casan_hf
from .tasks import METRICS, RESULTS_FILES, results_keys


# Left out of an upload, matched against every part of a path: hidden files and folders (.git, .env, .DS_Store),
# Trainer's private files (`_*`, `checkpoint-*`, its arguments `training_args.bin`, a pickle with the machine's
# paths) and the record of what a run received (its command line, with this machine's paths), which a study keeps.
LEFT_OUT = (".*", "_*", "checkpoint-*", "training_args.bin", RUN_START_NAME)
# A file larger than save_pretrained's shards is no part of a model: it goes up only when the pusher says so.
MAX_FILE_BYTES = 5 * 10**9
# Files that unpickle when loaded, by name (torch.load, joblib, dill); by content: a pickle stream, a zip that holds
# one (torch.save's format) or an object array, a .npy of objects (`unpickles`).
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".dill", ".pck")
PICKLE_PROTOCOLS = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")
TOKENIZER_FILE = "tokenizer_config.json"
# An absolute path whose first folder exists on this machine; a home folder of any machine; a Windows drive.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~-])/([\w.-]+)/[\w./-]+")
_HOME_OR_DRIVE = re.compile(r"(?<![\w/])(~/[\w.-]+|/(?:home|Users)/[\w.-]+|/root/[\w.-]+|[A-Za-z]:(?:\\\\?|/)[\w.-]+)")
_LOADED_NAME = re.compile(r"""from_pretrained\(\s*["']([^"']+)["']""")
PROBE_SENTENCES = ["The film was funny and gripping.", "A man is riding a bike down the road."]
PROBE = """
import json
import sys
import torch
import transformers
from transformers.dynamic_module_utils import get_class_from_dynamic_module

folder, auto_class, remote_code, inputs, outputs = sys.argv[1:]
remote_code = remote_code == "remote"
# The auto_map of config.json, and the one of the config class it loads (the class may write its own).
with open(f"{folder}/config.json", encoding="utf-8") as handle:
    entries = list((json.load(handle).get("auto_map") or {}).items())
config = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=remote_code)
entries += list((getattr(config, "auto_map", None) or {}).items())
for name, references in entries:
    if not hasattr(transformers, name):
        sys.exit(f"config.json: auto_map names {name}, which transformers {transformers.__version__} does not have")
    for reference in references if isinstance(references, (list, tuple)) else [references]:
        try:
            get_class_from_dynamic_module(reference, folder) if reference else None
        except Exception as error:
            sys.exit(f"config.json: auto_map's {name} entry {reference!r} does not load: {error}")
model = getattr(transformers, auto_class).from_pretrained(folder, trust_remote_code=remote_code).eval()
package = type(model).__module__.split(".")[0]
if package != ("transformers_modules" if remote_code else "transformers"):
    sys.exit(f"{auto_class} loaded {type(model).__module__}, not the folder's code")
with torch.no_grad():
    torch.save(model(**torch.load(inputs))[0], outputs)
"""


class FolderCheckError(ValueError):
    """A folder that is not pushed: the one-line message names the file or field and what is wrong with it."""


def _one_line(error):
    return " ".join(str(error).split())


def is_left_out(relative_path):
    return any(fnmatch(part, pattern) for part in Path(relative_path).parts for pattern in LEFT_OUT)


def upload_files(folder, max_file_bytes=MAX_FILE_BYTES):
    """The files an upload of `folder` sends (paths relative to it, sorted): every file but those `LEFT_OUT`. A
    symbolic link (file or folder), anything that is not a regular file and a file over `max_file_bytes` (None: no
    limit) are refused by name, as are a missing folder and one with nothing to send."""
    folder = Path(folder)
    if not folder.exists():
        raise FolderCheckError(f"{folder}: no such folder.")
    if not folder.is_dir():
        raise FolderCheckError(f"{folder}: not a folder.")
    files = []
    for root, folders, names in os.walk(folder):
        here = Path(root).relative_to(folder)
        folders[:] = [name for name in folders if not is_left_out(here / name)]
        for name in folders + names:
            relative, path = (here / name).as_posix(), Path(root) / name
            if is_left_out(relative):
                continue
            mode = path.lstat()
            if stat.S_ISLNK(mode.st_mode):
                raise FolderCheckError(
                    f"{relative}: a symbolic link (to {os.readlink(path)!r}); an upload sends nothing from outside "
                    "the folder: copy what it points at into the folder, or remove it."
                )
            if stat.S_ISDIR(mode.st_mode):
                continue
            if not stat.S_ISREG(mode.st_mode):
                raise FolderCheckError(f"{relative}: not a regular file; remove it from the folder.")
            if max_file_bytes is not None and mode.st_size > max_file_bytes:
                raise FolderCheckError(
                    f"{relative}: {mode.st_size} bytes, over the {max_file_bytes} bytes a file goes up with unless "
                    "allowed (--allow_large_files)."
                )
            files.append(relative)
    if not files:
        raise FolderCheckError(f"{folder}: empty (or only files an upload leaves out); nothing to push.")
    return sorted(files)


@contextmanager
def staged(folder, files):
    """A copy of `folder`'s `files` in a temporary folder: the checks read it and the upload sends it, so what goes
    up is what was checked, whatever happens to the folder meanwhile. No link is followed in the copy."""
    with tempfile.TemporaryDirectory(prefix="casan-push-") as stage:
        for name in files:
            target = Path(stage) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                source = os.open(Path(folder) / name, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError as error:
                raise FolderCheckError(f"{name}: cannot be read ({error.strerror}).") from None
            with open(source, "rb") as reader, open(target, "wb") as writer:
                shutil.copyfileobj(reader, writer)
        yield Path(stage)


def _npy_holds_objects(handle):
    npy = numpy.lib.format
    read_header = npy.read_array_header_1_0 if npy.read_magic(handle) == (1, 0) else npy.read_array_header_2_0
    return read_header(handle)[2].hasobject


def unpickles(path):
    """Whether loading `path` can unpickle: a `PICKLE_SUFFIXES` name, a pickle stream, a zip archive holding a
    pickle or an object array (torch.save, numpy.savez), or a .npy of objects."""
    if path.name.endswith(PICKLE_SUFFIXES):
        return True
    with open(path, "rb") as handle:
        head = handle.read(6)
        handle.seek(0)
        if head[:2] in PICKLE_PROTOCOLS:
            return True
        if head == numpy.lib.format.MAGIC_PREFIX:
            return _npy_holds_objects(handle)
    if head.startswith(b"PK\x03\x04") and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                if member.endswith(PICKLE_SUFFIXES) or member.endswith(".pkl"):
                    return True
                if member.endswith(".npy"):
                    with archive.open(member) as handle:
                        if handle.read(6) == numpy.lib.format.MAGIC_PREFIX:
                            with archive.open(member) as again:
                                if _npy_holds_objects(again):
                                    return True
    return False


def check_files(stage, files):
    """No file unpickles; every JSON file parses and every safetensors file reads; the weights are safetensors. A
    safetensors file is read as one, not sniffed: its first bytes are its header's length, which can read as a
    pickle's start (a 1408-byte header is `80 05`), and a pickle under that name does not read as safetensors."""
    for name in files:
        path = stage / name
        if name.endswith(".safetensors"):
            try:
                with safetensors.safe_open(path, "pt"):
                    pass
            except (safetensors.SafetensorError, OSError) as error:
                raise FolderCheckError(f"{name}: not a readable safetensors file ({_one_line(error)}).") from None
        elif unpickles(path):
            raise FolderCheckError(
                f"{name}: unpickles when loaded, and no pickle goes up; save weights with safe_serialization "
                "(safetensors) and other data as JSON."
            )
        if name.endswith(".json"):
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as error:
                raise FolderCheckError(f"{name}: not valid JSON ({_one_line(error)}).") from None
    if not any(name.endswith(".safetensors") for name in files):
        raise FolderCheckError("model.safetensors: the folder has no safetensors weights.")


def needs_remote_code(config):
    """Whether the folder's model loads with its own code (an `auto_map`), not as one of transformers' models
    (a `--baseline` run's plain BERT, whose card says no remote code is needed)."""
    return bool(config.get("auto_map")) or config.get("model_type") not in CONFIG_MAPPING_NAMES


def check_code(stage, files):
    """`config.json` with an `auto_map` (unless transformers knows the model), and every code file its modules
    import (transformers' `get_relative_import_files`); returns the config."""
    if "config.json" not in files:
        raise FolderCheckError("config.json: missing.")
    config = json.loads((stage / "config.json").read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        raise FolderCheckError(f"config.json: a JSON {type(config).__name__}, not an object.")
    if not needs_remote_code(config):
        return config
    auto_map = config.get("auto_map")
    if not auto_map:
        raise FolderCheckError(
            f"config.json: no auto_map, and its model_type {config.get('model_type')!r} is not one of transformers' "
            "own, so trust_remote_code finds no code to load."
        )
    references = [r for value in auto_map.values() for r in (value if isinstance(value, list) else [value]) if r]
    for module in sorted({reference.split("--")[-1].split(".")[0] for reference in references}):
        if f"{module}.py" not in files:
            raise FolderCheckError(f"{module}.py: missing; config.json's auto_map names it.")
        try:
            get_relative_import_files(stage / f"{module}.py")
        except FileNotFoundError as error:
            raise FolderCheckError(
                f"{Path(error.filename).name}: missing; {module}.py, which config.json's auto_map names, imports it."
            ) from None
    return config


def load_card(stage):
    """The folder's model card, its metadata parsed as huggingface_hub parses it (YAML, model-index)."""
    try:
        return ModelCard.load(stage / MODEL_CARD_NAME)
    except (yaml.YAMLError, ValueError, TypeError) as error:
        raise FolderCheckError(f"{MODEL_CARD_NAME}: its metadata does not parse ({_one_line(error)}).") from None


def card_scores(card):
    """{(split, metric): value} of a card's model-index."""
    return {(result.dataset_split, result.metric_type): result.metric_value for result in card.data.eval_results or []}


def results_scores(stage, name, splits):
    """{(split, metric): value rounded as a card keeps it} of the results file `name`, for the card's `splits`; not
    those of a split scored on part of its examples (`<prefix>_samples` below `<prefix>_split_samples`), which the
    card keeps out of its model-index."""
    scores = {}
    results = json.loads((stage / name).read_text(encoding="utf-8"))
    for key, value in results.items():
        keys, metric = results_keys(key)
        if keys is None or metric not in METRICS:
            continue
        split = next((split for split in keys.splits if split in splits), keys.splits[0])
        total = results.get(f"{keys.prefix}_split_samples{keys.suffix}")
        if total is None or results.get(f"{keys.prefix}_samples{keys.suffix}") == total:
            scores[split, metric] = round(float(value), METRICS[metric].decimals)
    return scores


def check_scores(stage, files, card):
    """Every score of every results file is the card's, and every score of the card is in a results file."""
    written = card_scores(card)
    splits = {split for split, _ in written}
    results = [name for name in RESULTS_FILES if name in files]
    for name in results:
        for (split, metric), value in sorted(results_scores(stage, name, splits).items()):
            if written.get((split, metric)) != value:
                shown = written.get((split, metric), "not shown")
                raise FolderCheckError(
                    f"{MODEL_CARD_NAME}: {metric} on {split} is {shown} in the card and {value} in {name}."
                )
    measured = {key for name in results for key in results_scores(stage, name, splits)}
    for (split, metric), value in sorted(written.items()):
        if (split, metric) not in measured:
            raise FolderCheckError(
                f"{MODEL_CARD_NAME}: {metric} on {split} is {value} in the card and in no results file "
                f"({', '.join(results) or 'none'})."
            )


def check_card(stage, files, config, repo_id=None):
    """The card parses; names its source by Hub id; holds the results files' scores; loads `repo_id` (None: the
    repository is not known) in its examples; shows no tokenizer the folder lacks."""
    if MODEL_CARD_NAME not in files:
        raise FolderCheckError(f"{MODEL_CARD_NAME}: missing; the model card goes up with the model.")
    card = load_card(stage)
    base_model = card.data.base_model
    if base_model is None and not (config.get("is_encoder_decoder") and FROM_SCRATCH in card.text):
        raise FolderCheckError(
            f"{MODEL_CARD_NAME}: no base_model; name the checkpoint it started from by its Hub id (--base_model)."
        )
    for name in [base_model] if isinstance(base_model, str) else base_model or []:
        if not is_hub_id(name):
            raise FolderCheckError(f"{MODEL_CARD_NAME}: base_model {name!r} is not a Hub id.")
    check_scores(stage, files, card)
    loaded = sorted(set(_LOADED_NAME.findall(card.text)) - {repo_id})
    if repo_id is not None and loaded:
        raise FolderCheckError(
            f"{MODEL_CARD_NAME}: its load example names {loaded[0]!r}, not the repository pushed to {repo_id!r}; "
            f"render the card with the model name {repo_id!r} (--hub_model_id, --model_name)."
        )
    if "AutoTokenizer.from_pretrained(" in card.text and TOKENIZER_FILE not in files:
        raise FolderCheckError(
            f"{MODEL_CARD_NAME}: its load example loads a tokenizer and the folder has none ({TOKENIZER_FILE}); "
            "save the tokenizer into the folder."
        )
    return card


def local_paths(text, folder):
    """The local paths `text` names (past a first `#!` line): the folder's own, absolute paths whose first folder
    exists on this machine, home folders and Windows drives."""
    if text.startswith("#!"):
        text = text.partition("\n")[2]
    found = [folder] if folder in text else []
    found += [match.group(0) for match in _ABSOLUTE_PATH.finditer(text) if os.path.isdir(f"/{match.group(1)}")]
    return found + _HOME_OR_DRIVE.findall(text)


def check_no_local_paths(stage, files, folder):
    for name in files:
        if name.endswith(".safetensors"):
            continue
        try:
            text = (stage / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        paths = local_paths(text, str(Path(folder).resolve()))
        if paths:
            raise FolderCheckError(f"{name}: names the local path {paths[0]!r}; a shared folder names none.")


def probe_batch(stage, files, config):
    """The probe inputs: the folder's tokenizer on `PROBE_SENTENCES`, or token ids without one."""
    if TOKENIZER_FILE in files:
        tokenizer = transformers.AutoTokenizer.from_pretrained(stage)
        inputs = dict(tokenizer(PROBE_SENTENCES, padding=True, return_tensors="pt"))
    else:
        generator = torch.Generator().manual_seed(0)
        input_ids = torch.randint(config["vocab_size"], (2, 8), generator=generator)
        inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    if config.get("is_encoder_decoder"):
        inputs["decoder_input_ids"] = inputs["input_ids"]
    return inputs


def auto_class_of(config):
    """The auto class that loads the folder's architecture: its `auto_map` entry, or, for transformers' own model,
    the head's whose class names end the architecture."""
    architecture = (config.get("architectures") or [None])[0]
    if needs_remote_code(config):
        for auto_class, reference in config["auto_map"].items():
            if isinstance(reference, str) and reference.split(".")[-1] == architecture and auto_class != "AutoConfig":
                return auto_class
        raise FolderCheckError(f"config.json: auto_map names no class for its architecture {architecture!r}.")
    for head in sorted(HEADS, key=lambda head: -len(head.suffix)):
        if architecture and architecture.endswith(head.suffix):
            return head.auto_class
    raise FolderCheckError(f"config.json: no auto class loads its architecture {architecture!r}.")


def check_loads_without_casan_hf(stage, files, config, python=sys.executable):
    """Every `auto_map` entry resolves in a process without casan_hf (run by `python`), and the architecture's auto
    class gives the probe batch's outputs."""
    auto_class = auto_class_of(config)
    remote_code = needs_remote_code(config)
    try:  # the folder's tokenizer and model, as casan_hf loads them; what they raise is the folder's fault
        inputs = probe_batch(stage, files, config)
        with torch.no_grad():
            model = getattr(transformers, auto_class).from_pretrained(stage).eval()
            expected = model(**inputs)[0]
    except Exception as error:
        raise FolderCheckError(
            f"{auto_class} does not load the folder with casan_hf ({type(error).__name__}: {_one_line(error)})."
        ) from None
    with tempfile.TemporaryDirectory() as workdir:
        torch.save(inputs, Path(workdir) / "inputs.pt")
        arguments = (stage, auto_class, "remote" if remote_code else "own", "inputs.pt", "outputs.pt")
        try:
            run_without_casan_hf(PROBE, workdir, python=python, args=arguments)
        except RuntimeError as error:
            last = [line for line in str(error).splitlines() if line.strip()][-1]
            raise FolderCheckError(f"{auto_class} does not load the folder without casan_hf: {last}") from None
        outputs = torch.load(Path(workdir) / "outputs.pt")
    if not torch.allclose(outputs, expected, rtol=1e-4, atol=1e-5):
        raise FolderCheckError(
            f"{auto_class} loaded without casan_hf gives other outputs on the probe batch than with it "
            f"(largest difference {(outputs - expected).abs().max().item():.3g})."
        )


def run_checks(folder, stage, files, repo_id=None, python=sys.executable):
    """Every check of the module's docstring on the staged copy `stage` of `folder`, in that order; returns the
    model card. A FolderCheckError names the first file or field that fails."""
    check_files(stage, files)
    config = check_code(stage, files)
    card = check_card(stage, files, config, repo_id)
    check_no_local_paths(stage, files, folder)
    check_loads_without_casan_hf(stage, files, config, python=python)
    return card


def check_folder(folder, repo_id=None, max_file_bytes=MAX_FILE_BYTES, python=sys.executable):
    """`run_checks` on a staged copy of `folder`'s `upload_files`; returns those files."""
    files = upload_files(folder, max_file_bytes)
    with staged(folder, files) as stage:
        run_checks(folder, stage, files, repo_id, python=python)
    return files


class Plan(NamedTuple):
    """What a push does to the branch: the files it adds, changes (other bytes), leaves as they are, deletes."""

    added: list
    changed: list
    unchanged: list
    deleted: list

    def lines(self):
        return [
            f"{what} {name}"
            for what, names in (("added", self.added), ("changed", self.changed), ("deleted", self.deleted))
            for name in names
        ]


def remote_files(api, repo_id, revision):
    """{path: RepoFile} of the branch `revision` (None: main), or of main where the branch is not made yet; {} where
    the repository does not exist."""
    for branch in dict.fromkeys([revision or "main", "main"]):
        try:
            tree = api.list_repo_tree(repo_id, revision=branch, recursive=True)
            return {entry.path: entry for entry in tree if hasattr(entry, "blob_id")}
        except RevisionNotFoundError:
            continue
        except RepositoryNotFoundError:
            return {}
    return {}


def same_bytes(path, entry):
    data = path.read_bytes()
    return entry.lfs.sha256 == sha256(data).hexdigest() if entry.lfs else entry.blob_id == git_hash(data)


def plan_push(stage, files, remote, keep_patterns=()):
    """The `Plan` of making the branch whose files are `remote` hold `files` (staged in `stage`): every remote file
    the folder does not hold is deleted, as `upload_folder`'s `delete_patterns` would, but those matching
    `keep_patterns` and `.gitattributes`, which the Hub keeps."""
    added = [name for name in files if name not in remote]
    changed = [name for name in files if name in remote and not same_bytes(stage / name, remote[name])]
    unchanged = [name for name in files if name in remote and name not in changed]
    stale = [name for name in sorted(remote) if name not in files and name != ".gitattributes"]
    deleted = list(filter_repo_objects(stale, ignore_patterns=list(keep_patterns) or None))
    return Plan(added, changed, unchanged, deleted)


@contextmanager
def reaching_the_hub(repo_id, what):
    """Any error on the way to and from the Hub (offline mode, no connection, a refusal) as one line naming `what`
    was asked. The HTTP clients' errors share no base class across huggingface_hub's releases, hence `Exception`."""
    try:
        yield
    except FolderCheckError:
        raise
    except Exception as error:
        raise FolderCheckError(f"{repo_id}: {what} failed ({type(error).__name__}: {_one_line(error)}).") from None


def check_repo_id(repo_id):
    """A repository id with its owner (`you/name`), as huggingface_hub validates it: the card's examples must load
    the repository pushed to, and a bare name would become `<your user>/name` on the Hub."""
    if not is_hub_id(repo_id) or "/" not in repo_id:
        raise FolderCheckError(
            f"{repo_id!r}: not a repository id with its owner, such as 'you/{str(repo_id).split('/')[-1]}'; the "
            "card's examples load the repository by that id."
        )


def validate_on_the_hub(card):
    """The Hub's own validation of the card's metadata (licence, pipeline tag, model-index), by huggingface_hub."""
    try:
        card.validate()
    except ValueError as error:
        raise FolderCheckError(f"{MODEL_CARD_NAME}: the Hub refuses its metadata ({_one_line(error)}).") from None


def push_folder(
    folder,
    repo_id,
    revision=None,
    private=None,
    token=None,
    commit_message="Upload with casan-hf",
    keep_patterns=(),
    max_file_bytes=MAX_FILE_BYTES,
    dry_run=False,
):
    """Checks `folder` (`check_folder`, and the Hub's validation of its card), then makes the branch `revision`
    (None: main; created from main if need be) of `repo_id` hold exactly the folder's `upload_files`, in one commit:
    the staged bytes added, every other file of the branch deleted but `keep_patterns`. The repository is created
    (private if `private`, else as the Hub's default for its owner) only once everything is checked, and deleted
    again when it was created here and the commit fails. Returns `(plan, CommitInfo)`; `dry_run`: the plan alone,
    nothing sent. Every failure is a one-line FolderCheckError."""
    check_repo_id(repo_id)
    files = upload_files(folder, max_file_bytes)
    api = HfApi(token=token)
    with staged(folder, files) as stage:
        card = run_checks(folder, stage, files, repo_id)
        with reaching_the_hub(repo_id, "the Hub's validation of README.md"):
            validate_on_the_hub(card)
        with reaching_the_hub(repo_id, "listing the branch's files"):
            remote = remote_files(api, repo_id, revision)
        plan = plan_push(stage, files, remote, keep_patterns)
        if dry_run:
            return plan, None
        with reaching_the_hub(repo_id, "creating the repository"):
            created = not remote and not api.repo_exists(repo_id)
            repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id  # "name": "user/name"
        operations = [CommitOperationDelete(path_in_repo=name) for name in plan.deleted]
        operations += [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(stage / name)) for name in files]
        try:
            with reaching_the_hub(repo_id, "the commit"):
                if revision is not None:
                    api.create_branch(repo_id, branch=revision, exist_ok=True)
                commit = api.create_commit(repo_id, operations, commit_message=commit_message, revision=revision)
        except FolderCheckError as error:
            if not created:
                raise
            with reaching_the_hub(repo_id, f"{error} Deleting the repository this push created"):
                api.delete_repo(repo_id)
            raise FolderCheckError(f"{error} The repository this push created is deleted again.") from None
    return plan, commit
