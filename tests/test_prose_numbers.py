"""The figures the docs quote from the studies are the studies' own: in README.md, docs/TRANSLATION.md and
docs/RESULTS.md, each quoted result (`<!-- quote: STUDY ARM METRIC KIND -->TEXT<!-- /quote -->`) is, character for
character, what its arm's records give, sign included, every interval inside a figures block is such a quote, and
every other decimal number inside a `<!-- figures: NAME ... -->` ... `<!-- /figures -->` block is, as written, a
number of the named studies' generated tables, or a per-seed score or difference to the twin of one of their
comparisons, at the table's digits. The rule is docs/TESTS.md's, "Figures in the docs"."""

import re

import pytest
from conftest import REPO_ROOT

from casan_hf.studies import STUDIES
from casan_hf.studies.quotes import quoted, study_comparisons


DOCS = ("README.md", "docs/TRANSLATION.md", "docs/RESULTS.md")
BLOCK = re.compile(r"<!-- figures: (.+?) -->(.*?)<!-- /figures -->", re.DOTALL)
NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*\.\d+")  # a decimal number; integers (counts, seeds, dates) are not
CODE_SPAN = re.compile(r"`[^`]*`")  # names and commands, not figures: `gate_bias_init=0.0`
QUOTE = re.compile(r"<!-- quote: (.+?) -->(.*?)<!-- /quote -->", re.DOTALL)
INTERVAL = re.compile(r"\[[-+]?\d[\d.]*, [-+]?\d[\d.]*\]")


def numbers_in(text):
    """Each decimal number of `text` as written, without its sign and thousands separators."""
    return {number.lstrip("+-").replace(",", "") for number in NUMBER.findall(text)}


def figures_of(name):
    """The numbers a block naming `name` may quote: those of a study's generated tables and each seed's score and
    difference to the twin in its comparisons, at the table's digits; or those of a results table named by path
    (a sweep made before the catalog)."""
    if name not in STUDIES:
        return numbers_in((REPO_ROOT / name).read_text())
    study = STUDIES[name]
    figures = numbers_in((REPO_ROOT / study.results).with_suffix(".md").read_text())
    for comparison in study_comparisons(name, REPO_ROOT):
        for _, runs, twin_runs in comparison.rows:
            values = list(comparison.scores(runs).values())
            if twin_runs is not None:
                values += comparison.differences(runs, twin_runs).values()
            figures |= {f"{abs(value):.{comparison.digits}f}" for value in values}
    return figures


def unquoted(block):
    """A figures block without its code spans and quotes (these are checked by `misquoted`)."""
    return QUOTE.sub("", CODE_SPAN.sub("", block))


def unfound_numbers(doc_text, figures_of=figures_of):
    """`(block's names, number)` for each number of a figures block of `doc_text` that its studies do not hold."""
    unfound = []
    for names, block in BLOCK.findall(doc_text):
        figures = set().union(*(figures_of(name) for name in names.split()))
        unfound += [(names, number) for number in sorted(numbers_in(unquoted(block)) - figures)]
    return unfound


def misquoted(doc_text, root=REPO_ROOT):
    """`(quote, as written, as its records give it)` for each quote of `doc_text` that its arm's records do not
    give, and `(None, interval, "a quote")` for each interval of a figures block typed outside a quote."""
    wrong = [(spec, text, quoted(spec, root)) for spec, text in QUOTE.findall(doc_text)]
    wrong = [(spec, text, expected) for spec, text, expected in wrong if text != expected]
    for _, block in BLOCK.findall(doc_text):
        wrong += [(None, interval, "a quote") for interval in INTERVAL.findall(unquoted(block))]
    return wrong


@pytest.mark.parametrize("doc", DOCS)
def test_every_figure_a_doc_quotes_from_a_study_is_in_its_tables_or_records(doc):
    text = (REPO_ROOT / doc).read_text()
    blocks = BLOCK.findall(text)
    assert blocks, f"{doc} has no figures block"
    assert text.count("<!-- figures:") == text.count("<!-- /figures -->") == len(blocks)
    for names, block in blocks:
        for name in names.split():
            assert name in STUDIES or (REPO_ROOT / name).is_file(), f"{doc}: {name!r} is neither a study nor a file"
        assert QUOTE.search(block) or numbers_in(unquoted(block)), f"{doc}: the block of {names} quotes no figure"
    assert unfound_numbers(text) == []
    assert misquoted(text) == []


def test_a_figure_rounded_by_hand_is_not_the_tables():
    table = {"micro": {"0.835", "0.64", "27.8"}}
    doc = "<!-- figures: micro -->layer 4: 0.84, worse by +0.64%, 27.8-48.9 min, `bias=0.5`<!-- /figures --> 0.7"
    assert unfound_numbers(doc, table.get) == [("micro", "0.84"), ("micro", "48.9")]


def test_a_quote_is_its_arms_result_with_its_sign():
    spec = 'translation-micro-deep-output-gate none:output_gate="elementwise" test_cross_entropy'
    doc = "<!-- figures: x -->{}<!-- /figures -->".format
    right = f"<!-- quote: {spec} paired -->+0.008 [-0.002, +0.017]<!-- /quote -->"
    assert misquoted(doc(right)) == []
    flipped = right.replace("+0.008", "-0.008")
    assert misquoted(doc(flipped)) == [(f"{spec} paired", "-0.008 [-0.002, +0.017]", "+0.008 [-0.002, +0.017]")]
    assert misquoted(doc(f"<!-- quote: {spec} won -->5 of 5<!-- /quote -->"))[0][2] == "0 of 5"
    assert misquoted(doc(f"<!-- quote: {spec} verdict -->pays<!-- /quote -->"))[0][2] == "level"
    assert misquoted(doc("typed by hand: +0.008 [-0.002, +0.017]")) == [(None, "[-0.002, +0.017]", "a quote")]
    with pytest.raises(ValueError, match="'rte_f1' is not a study"):
        misquoted("<!-- quote: rte_f1 none test_bleu diff -->+0.1<!-- /quote -->")
    with pytest.raises(ValueError, match="arm 'deep' names 0 rows"):
        misquoted("<!-- quote: translation-micro-deep-output-gate deep test_bleu diff -->+0.1<!-- /quote -->")
