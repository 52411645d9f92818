"""The cards of the checkpoints casan-hf publishes (model_cards/, `tooling/release.py`, docs/HUB.md): every
committed card is what `make cards` renders from its committed record today, so a changed score, hyper-parameter,
base model or code version, in the card or in what it is made from, fails here, and another installed transformers
does not; `make cards` writes into the repository it is run from; every dataset a card names is a Hub id; the folder
holds the release set's cards and the template, nothing else; docs/HUB.md lists the set."""

import difflib
import json
import shutil
from pathlib import Path

import pytest
import transformers
from conftest import load_script
from huggingface_hub import ModelCard
from huggingface_hub.utils import validate_repo_id

import casan_hf.hub.card
from tooling import release
from tooling.catalog import STUDIES


REPO_ROOT = Path(__file__).resolve().parents[1]


def differences(committed, rendered):
    return "".join(
        difflib.unified_diff(committed.splitlines(True), rendered.splitlines(True), "committed", "rendered")
    )


def test_every_committed_card_is_what_its_record_renders(minilm_path):
    for item in release.releases():
        committed = (REPO_ROOT / item.card).read_text(encoding="utf-8")
        rendered = release.render_card(item, minilm_path)
        assert committed == rendered, f"{item.card} is not its record's card (`make cards`):\n" + differences(
            committed, rendered
        )


def test_a_card_names_its_records_transformers_not_the_installed_one(minilm_path, monkeypatch):
    """The cards do not move with the environment: rendered under another transformers, each is the committed one
    (the translation record keeps its run's versions; the others name constraints.txt's pin)."""
    monkeypatch.setattr(transformers, "__version__", "99.0.0")
    for name in (GLUE_RELEASE, "casan-marian-small-multi30k-deep_global"):
        (item,) = [item for item in release.releases() if item.name == name]
        assert release.render_card(item, minilm_path) == (REPO_ROOT / item.card).read_text(encoding="utf-8")


def test_make_cards_writes_into_the_repository_it_is_run_from(minilm_path, tmp_path, monkeypatch):
    """scripts/render_model_cards.py renders the records of its own repository into its own model_cards/, wherever
    casan_hf is installed from."""
    script = load_script("render_model_cards")
    assert script.REPOSITORY == REPO_ROOT
    written = []
    monkeypatch.setattr(script, "write_cards", lambda minilm, repository: written.append(repository) or [])
    script.main(["--minilm_path", minilm_path])
    assert written == [REPO_ROOT]


def test_every_dataset_a_card_names_is_a_hub_id_and_the_translation_card_reads_well():
    for item in release.releases():
        card = ModelCard.load(REPO_ROOT / item.card)
        for result in card.data.eval_results or []:
            validate_repo_id(result.dataset_type)
    text = (REPO_ROOT / "model_cards" / "casan-marian-small-multi30k-deep_global.md").read_text()
    assert "An encoder-decoder translating en into de " in text and "A en-de" not in text


def test_model_cards_holds_the_template_and_the_release_sets_cards():
    cards = {path.relative_to(REPO_ROOT).as_posix() for path in (REPO_ROOT / "model_cards").glob("*.md")}
    assert cards == {item.card for item in release.releases()} | {"model_cards/model_card_template.md"}


def test_docs_hub_lists_the_release_set():
    hub = (REPO_ROOT / "docs" / "HUB.md").read_text()
    for item in release.releases():
        assert f"[`{item.repo_id}`]({item.card.replace('model_cards', '../model_cards')})" in hub, item.repo_id


GLUE_RELEASE = "all-MiniLM-L6-v2-casan-deep_global-mrpc"


def change_record(repository, change):
    """Applies `change` to the record of the GLUE release in a copy of its results file under `repository`."""
    results = repository / STUDIES[release.GLUE_STUDY].results
    results.parent.mkdir(parents=True)
    records = json.loads((REPO_ROOT / STUDIES[release.GLUE_STUDY].results).read_text())
    (item,) = [item for item in release.releases(REPO_ROOT) if item.name == GLUE_RELEASE]
    change(release.find_record(item, records))
    results.write_text(json.dumps(records))
    shutil.copy(REPO_ROOT / release.CONSTRAINTS, repository / release.CONSTRAINTS)
    return item


CHANGES = {  # what changes in a record (or in the code), and the card line that says it
    "score": (lambda record: record.update(eval_f1=0.5), "| validation | F1 | 0.5000 |"),
    "hyper-parameter": (lambda record: record["settings"].update(learning_rate=3e-05), "| learning_rate | `3e-05` |"),
    "base model": (
        lambda record: record["settings"].update(base_model="you/other-minilm"),
        "base_model: you/other-minilm",
    ),
}


@pytest.mark.parametrize("what", [*CHANGES, "code version"])
def test_a_change_to_what_a_card_states_makes_it_another_card(minilm_path, tmp_path, monkeypatch, what):
    if what == "code version":
        monkeypatch.setattr(casan_hf.hub.card, "__version__", "0.2.0")
        change, line = (lambda record: None), "Made with casan-hf 0.2.0 and transformers"
    else:
        change, line = CHANGES[what]
    item = change_record(tmp_path, change)
    rendered = release.render_card(item, minilm_path, repository=tmp_path)
    assert line in rendered and rendered != (REPO_ROOT / item.card).read_text(encoding="utf-8")
