"""The cards of the checkpoints casan-hf publishes (model_cards/, `casan_hf.studies.release`, docs/HUB.md): every
committed card is what `make cards` renders from its committed record today, so a changed score, hyper-parameter,
base model or code version, in the card or in what it is made from, fails here; the folder holds the release set's
cards and the template, nothing else; docs/HUB.md lists the set."""

import difflib
import json
from pathlib import Path

import pytest

import casan_hf.hub.card
from casan_hf.studies import release
from casan_hf.studies.catalog import STUDIES


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
