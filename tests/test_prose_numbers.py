"""The figures the docs quote from the studies are the studies' own: in README.md, docs/TRANSLATION.md and
docs/RESULTS.md, every decimal number inside a `<!-- figures: NAME ... -->` ... `<!-- /figures -->` block is, as
written, a number of the named studies' generated tables, or a per-seed score or difference to the twin of one of
their comparisons, at the table's digits. The rule is docs/TESTS.md's, "Figures in the docs"."""

import re

import pytest
from conftest import REPO_ROOT

from casan_hf.studies import STUDIES, glue, load_results, translation


DOCS = ("README.md", "docs/TRANSLATION.md", "docs/RESULTS.md")
BLOCK = re.compile(r"<!-- figures: (.+?) -->(.*?)<!-- /figures -->", re.DOTALL)
NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*\.\d+")  # a decimal number; integers (counts, seeds, dates) are not
CODE_SPAN = re.compile(r"`[^`]*`")  # names and commands, not figures: `gate_bias_init=0.0`


def numbers_in(text):
    """Each decimal number of `text` as written, without its sign and thousands separators."""
    return {number.lstrip("+-").replace(",", "") for number in NUMBER.findall(text)}


def study_comparisons(records, sweep):
    if sweep == "translation":
        return [c for budget in translation.budgets(records) for c in translation.budget_comparisons(*budget)]
    return glue.comparisons(records[0]["settings"]["classifier_pooling"], records)


def figures_of(name):
    """The numbers a block naming `name` may quote: those of a study's generated tables and each seed's score and
    difference to the twin in its comparisons, at the table's digits; or those of a results table named by path
    (a sweep made before the catalog)."""
    if name not in STUDIES:
        return numbers_in((REPO_ROOT / name).read_text())
    study = STUDIES[name]
    figures = numbers_in((REPO_ROOT / study.results).with_suffix(".md").read_text())
    for comparison in study_comparisons(load_results(REPO_ROOT / study.results), study.sweep):
        for _, runs, twin_runs in comparison.rows:
            values = list(comparison.scores(runs).values())
            if twin_runs is not None:
                values += comparison.differences(runs, twin_runs).values()
            figures |= {f"{abs(value):.{comparison.digits}f}" for value in values}
    return figures


def unfound_numbers(doc_text, figures_of=figures_of):
    """`(block's names, number)` for each number of a figures block of `doc_text` that its studies do not hold."""
    unfound = []
    for names, block in BLOCK.findall(doc_text):
        figures = set().union(*(figures_of(name) for name in names.split()))
        unfound += [(names, number) for number in sorted(numbers_in(CODE_SPAN.sub("", block)) - figures)]
    return unfound


@pytest.mark.parametrize("doc", DOCS)
def test_every_figure_a_doc_quotes_from_a_study_is_in_its_tables_or_records(doc):
    text = (REPO_ROOT / doc).read_text()
    blocks = BLOCK.findall(text)
    assert blocks, f"{doc} has no figures block"
    assert text.count("<!-- figures:") == text.count("<!-- /figures -->") == len(blocks)
    for names, block in blocks:
        for name in names.split():
            assert name in STUDIES or (REPO_ROOT / name).is_file(), f"{doc}: {name!r} is neither a study nor a file"
        assert numbers_in(CODE_SPAN.sub("", block)), f"{doc}: the block of {names} quotes no figure"
    assert unfound_numbers(text) == []


def test_a_figure_rounded_by_hand_is_not_the_tables():
    table = {"micro": {"0.835", "0.64", "27.8"}}
    doc = "<!-- figures: micro -->layer 4: 0.84, worse by +0.64%, 27.8-48.9 min, `bias=0.5`<!-- /figures --> 0.7"
    assert unfound_numbers(doc, table.get) == [("micro", "0.84"), ("micro", "48.9")]
