"""What a push sends, and the checks it passes before anything is sent (`casan_hf.hub.push` commits it): `check_folder`
refuses a folder that anyone loading it by repo id would find wanting, or that holds what no one should share,
naming the file or field in one line.

The file list is decided once (`upload_files`), and the files are copied into a staging folder (`staged`) that
every check reads and the upload sends: what is sent is what was checked. The checks, cheapest first:
- the files: no symbolic link, and no hard link with a link outside the folder (their bytes would come from outside
  it), no file over `MAX_FILE_BYTES` unless allowed; hidden files and folders, Trainer's private files and the run
  record are left out (`LEFT_OUT`);
- no file that unpickles, by what it holds, not by its name: a pickle stream of any protocol (`pickletools` reads it
  to its end), the same compressed with gzip, bz2 or xz, a zip archive holding one (torch.save's format) or an
  object array, a .npy of objects (`unpickles`);
- every JSON file parses, every safetensors file reads, and the weights are safetensors;
- `config.json` with an `auto_map`, and every code file that its modules import, relatively, present (a
  `--baseline` run's model is transformers' own and needs no code);
- a model card (`README.md`) whose metadata parses, whose `base_model` is a Hub id (a translation model trained
  from scratch has none), whose scores are those of every results file of the folder, whose load examples name the
  repository pushed to, and which shows no tokenizer the folder lacks;
- no text file that names a local path (a folder of this machine, a home folder, a Windows drive) or holds a
  credential (`CREDENTIAL_DETECTORS`: a Hub token, a cloud or service key, a private key), named by its line and
  shown masked;
- the folder loads in a fresh process without casan_hf: every `auto_map` entry resolves to a class of the folder's
  code, and the architecture's auto class gives, on a probe batch, the outputs it gives with casan_hf.
"""

import bz2
import gzip
import json
import lzma
import os
import pickletools
import re
import shutil
import stat
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from fnmatch import fnmatch
from pathlib import Path

import numpy
import safetensors
import torch
import transformers
import yaml
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.ip_public import IPPublicDetector
from huggingface_hub import ModelCard
from transformers.dynamic_module_utils import get_relative_import_files
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

from ..families import HEADS
from .card import FROM_SCRATCH
from .folder import MODEL_CARD_NAME, RUN_START_NAME, is_hub_id
from .fresh_process import run_without_casan_hf
from .tasks import METRICS, RESULTS_FILES, results_keys


# Left out of an upload, matched against every part of a path: hidden files and folders (.git, .env, .DS_Store),
# Trainer's private files (`_*`, `checkpoint-*`, its arguments `training_args.bin`, a pickle with the machine's
# paths) and the record of what a run received (its command line, with this machine's paths), which a study keeps.
LEFT_OUT = (".*", "_*", "checkpoint-*", "training_args.bin", RUN_START_NAME)
# A file larger than save_pretrained's shards is no part of a model: it goes up only when the pusher says so.
MAX_FILE_BYTES = 5 * 10**9
# The compressed forms a loader opens as the file they hold (joblib and pandas open `x.pkl.gz`), by their first bytes.
DECOMPRESSORS = {b"\x1f\x8b": gzip.open, b"BZh": bz2.open, b"\xfd7zXZ\x00": lzma.open}
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


def one_line(error):
    return " ".join(str(error).split())


def is_left_out(relative_path):
    return any(fnmatch(part, pattern) for part in Path(relative_path).parts for pattern in LEFT_OUT)


def upload_files(folder, max_file_bytes=MAX_FILE_BYTES):
    """The files an upload of `folder` sends (paths relative to it, sorted): every file but those `LEFT_OUT`. A
    symbolic link (file or folder), a hard link with more links than the folder's files hold (its bytes are also a
    file elsewhere, which the same edit changes), anything that is not a regular file and a file over
    `max_file_bytes` (None: no limit) are refused by name, as are a missing folder and one with nothing to send."""
    folder = Path(folder)
    if not folder.exists():
        raise FolderCheckError(f"{folder}: no such folder.")
    if not folder.is_dir():
        raise FolderCheckError(f"{folder}: not a folder.")
    files, links = [], {}
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
            links.setdefault((mode.st_dev, mode.st_ino), []).append((relative, mode.st_nlink))
    for names in links.values():
        relative, count = names[0]
        if count > len(names):
            raise FolderCheckError(
                f"{relative}: a hard link ({count} links to its bytes, {len(names)} of them among the files sent); "
                "an upload sends nothing from outside the folder: copy the file into the folder (cp, not ln), or "
                "remove it."
            )
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


class _Discard:
    def write(self, text):
        pass


def is_pickle_stream(handle):
    """Whether the stream `handle` reads, from where it stands, as a whole pickle of any protocol: `pickletools`
    follows its opcodes, memo and stack to its STOP as `pickle.load` would, without running anything. Text, JSON
    and numbers fail at their first bytes."""
    try:
        pickletools.dis(handle, out=_Discard())
    except Exception:  # a malformed stream: pickletools raises ValueError, and the decompressors their own errors
        return False
    return True


def _npy_holds_objects(handle):
    npy = numpy.lib.format
    read_header = npy.read_array_header_1_0 if npy.read_magic(handle) == (1, 0) else npy.read_array_header_2_0
    return read_header(handle)[2].hasobject


def holds_a_pickle(opened):
    """Whether the stream `opened()` gives (a file, a decompressed file, a zip member) unpickles when loaded: a
    pickle stream, a .npy of objects, or, compressed with one of `DECOMPRESSORS`, either of those."""
    with opened() as handle:
        head = handle.read(6)
    decompress = next((open_ for magic, open_ in DECOMPRESSORS.items() if head.startswith(magic)), None)
    if decompress is not None:
        return holds_a_pickle(lambda: decompress(opened()))
    with opened() as handle:
        if head == numpy.lib.format.MAGIC_PREFIX:
            return _npy_holds_objects(handle)
        return is_pickle_stream(handle)


def unpickles(path):
    """Whether loading `path` can unpickle, by what it holds (whatever its name): `holds_a_pickle` of the file, or of
    a member of the zip archive it is (torch.save, numpy.savez)."""
    if holds_a_pickle(lambda: open(path, "rb")):
        return True
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        return any(holds_a_pickle(lambda member=member: archive.open(member)) for member in archive.namelist())


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
                raise FolderCheckError(f"{name}: not a readable safetensors file ({one_line(error)}).") from None
        elif unpickles(path):
            raise FolderCheckError(
                f"{name}: unpickles when loaded, and no pickle goes up; save weights with safe_serialization "
                "(safetensors) and other data as JSON."
            )
        if name.endswith(".json"):
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as error:
                raise FolderCheckError(f"{name}: not valid JSON ({one_line(error)}).") from None
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
        raise FolderCheckError(f"{MODEL_CARD_NAME}: its metadata does not parse ({one_line(error)}).") from None


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
            f"push with --render_card, which renders the card's name and examples for {repo_id!r} in what is sent "
            "(the folder's own card stays as it is), or render the card with that model name (--hub_model_id, "
            "--model_name)."
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


def text_files(stage, files):
    """(name, text) of each of the staged `files` that is UTF-8 text (the safetensors weights are not read)."""
    for name in files:
        if name.endswith(".safetensors"):
            continue
        try:
            yield name, (stage / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue


def check_no_local_paths(stage, files, folder):
    for name, text in text_files(stage, files):
        paths = local_paths(text, str(Path(folder).resolve()))
        if paths:
            raise FolderCheckError(f"{name}: names the local path {paths[0]!r}; a shared folder names none.")


class HubTokenDetector(RegexBasedDetector):
    """A Hugging Face access token (`hf_` and 34 letters and digits), which detect-secrets has no detector for."""

    secret_type = "Hugging Face Token"
    denylist = [re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}")]


# The credentials no text file may hold: a Hub token, and detect-secrets' detectors of a credential by its own form
# (cloud and service keys and tokens, private keys, passwords in URLs, JWTs). Its entropy and keyword detectors are
# left out, for they flag what every model folder holds (a tokenizer's vocabulary, a card's commit ids, the word
# "token"), and so is its public-IP detector (an address grants no access).
CREDENTIAL_DETECTORS = [HubTokenDetector()] + [
    detector()
    for detector in get_mapping_from_secret_type_to_class().values()
    if issubclass(detector, RegexBasedDetector) and detector is not IPPublicDetector
]


def masked(secret):
    """`secret` with all but its first four characters hidden: enough to recognise it, not to use it."""
    return secret[:4] + "*" * max(len(secret) - 4, 4)


def credentials(text):
    """(line number, secret type, secret) of each credential `CREDENTIAL_DETECTORS` find in `text`."""
    for number, line in enumerate(text.splitlines(), 1):
        for detector in CREDENTIAL_DETECTORS:
            for secret in detector.analyze_string(line):
                yield number, detector.secret_type, secret


def check_no_credentials(stage, files):
    for name, text in text_files(stage, files):
        for number, kind, secret in credentials(text):
            raise FolderCheckError(
                f"{name} line {number}: holds a credential ({kind}: {masked(secret)}), and none goes up; remove it, "
                "and revoke it if it was ever shared."
            )


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
            f"{auto_class} does not load the folder with casan_hf ({type(error).__name__}: {one_line(error)})."
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
    check_no_credentials(stage, files)
    check_loads_without_casan_hf(stage, files, config, python=python)
    return card


def check_folder(folder, repo_id=None, max_file_bytes=MAX_FILE_BYTES, python=sys.executable):
    """`run_checks` on a staged copy of `folder`'s `upload_files`; returns those files."""
    files = upload_files(folder, max_file_bytes)
    with staged(folder, files) as stage:
        run_checks(folder, stage, files, repo_id, python=python)
    return files
