"""The figures the docs state are the records' and the code's (docs/TESTS.md, "Figures in the docs"): README.md,
docs/RESULTS.md, docs/TRANSLATION*.md and docs/CAUSAL.md (and the quotes of docs/METHOD.md and docs/TESTS.md) are,
character for character, what `make docs` renders from the committed records (`tooling/render.py`): every table whole,
each quote with its sign, every verdict. Outside the rendered blocks and quotes, each result figure of those docs
(`result_figures`: a number with a decimal part, a percentage, a ratio, a mean ± std, a count of runs, a timing) stands
in a phrase of `doc_figures.LOOSE`, listed with the test here that computes it or the record that holds it; and the
other docs quote no study figure by hand."""

import math
import re
import statistics

import pytest
import torch
from conftest import REPO_ROOT
from doc_figures import LOOSE, VERDICTS
from scipy import stats
from transformers import LlamaConfig, LlamaForCausalLM

from casan_hf import CasanConfig, CasanForSequenceClassification, CasanModel
from casan_hf.studies import detectable_difference
from casan_hf.studies.causal import MODEL_SIZES
from tooling.catalog import study_records
from tooling.quotes import quoted, verdicts_summary
from tooling.render import DOCS, METHOD_DOCS, RENDER, TRANSLATION_DOCS, block, render
from tooling.results import StudyResults


RESULTS_DOCS = ("README.md", "docs/RESULTS.md", *TRANSLATION_DOCS, "docs/CAUSAL.md")
QUOTE = re.compile(r"<!-- quote: .+? -->.*?<!-- /quote -->", re.DOTALL)
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
INDENTED_CODE = re.compile(r"^ {4}.*$", re.MULTILINE)  # list items continue at two spaces; code is at four
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
LINK_TARGET = re.compile(r"\]\([^)]*\)")
CODE_SPAN = re.compile(r"`[^`]*`")
# A number of the prose: its sign, its digits (thousands separators, every dotted part) and a percent sign.
NUMBER = re.compile(r"(?<![\w.\-])([-+]?)(\d+(?:,\d{3})*(?:\.\d+)*)( ?%)?")
# What makes a number a result figure (docs/TESTS.md, "Figures in the docs"): a percentage, a decimal part, "±"
# beside it, "x" after it (a ratio), or "runs", "minutes", "hours", "s" or "points" after it, one word between allowed
# ("36 fine-tuning runs"). Not a result: a version or an identifier (two dots, or after a package's name or
# "arXiv": "Python 3.11"), and the paired statistics' fixed levels (a 95% interval, 80% power, the 5% level)
# unsigned.
RESULT_AFTER = re.compile(r" ?(?:±|x\b)| (?:[\w-]+ )?(?:runs?|minutes?|hours?|s|points?)\b")
RESULT_BEFORE = re.compile(r"± $")
VERSION_AFTER = re.compile(r"\b(?:Python|torch|transformers|datasets|evaluate|sacrebleu|accelerate|arXiv) $")
STATISTICS_LEVELS = ("95", "80", "5")
# A count of seeds won or lost ("below the twin at 0 of 5 seeds"): a result, a quote's `won` when it is one.
SEEDS_WON = re.compile(r"(?<![\w.])\d+ of \d+ (?:[\w-]+ )?seeds?\b")
# A verdict in words about an arm (`doc_figures.VERDICTS`).
VERDICT_WORD = re.compile(
    r"(?<![\w-])(?:pays?|paid|worse|better|level|buys? nothing|no effect|does not (?:move|add)|adds nothing|costs?)"
    r"(?![\w-])",
    re.IGNORECASE,
)


def cleaned(text):
    """The prose of a doc as one line: without rendered blocks, quotes (each left as `…`), code, comments and link
    targets; and the same with each code span's characters masked, where tokens are looked for."""
    text = RENDER.sub(" ", text)
    text = QUOTE.sub("…", text)
    text = INDENTED_CODE.sub(" ", FENCE.sub(" ", text))
    text = " ".join(LINK_TARGET.sub("]", COMMENT.sub(" ", text)).split())
    masked = CODE_SPAN.sub(lambda span: "`" + "x" * (len(span.group()) - 2) + "`", text)
    return text, masked


def result_figures(masked):
    """The `(start, end)` of each result figure in a doc's prose (code spans masked)."""
    spans = []
    for match in NUMBER.finditer(masked):
        sign, digits, percent = match.groups()
        before, after = masked[max(0, match.start() - 20) : match.start()], masked[match.end() : match.end() + 40]
        if digits.count(".") > 1 or VERSION_AFTER.search(before):
            continue
        if (
            (percent and (sign or digits not in STATISTICS_LEVELS))
            or (not percent and "." in digits)
            or RESULT_BEFORE.search(before)
            or RESULT_AFTER.match(after)
        ):
            spans.append(match.span())
    return sorted(spans + [match.span() for match in SEEDS_WON.finditer(masked)])


def verdict_words(masked):
    """The `(start, end)` of each verdict word in a doc's prose (code spans masked)."""
    return [match.span() for match in VERDICT_WORD.finditer(masked)]


def unlisted(doc_text, listed, found=result_figures):
    """`(missing, loose, idle)`: the phrases of `listed` that the doc's prose does not hold, each result figure (or
    what `found` finds) of the prose that no listed phrase holds (with its neighbourhood), and the phrases that hold
    none."""
    text, masked = cleaned(doc_text)
    figures = found(masked)
    covered = [False] * len(text)
    missing, idle = [], []
    for phrase in listed:
        spans = [match.span() for match in re.finditer(re.escape(phrase), text)]
        if not spans:
            missing.append(phrase)
        elif not any(start <= low and high <= end for start, end in spans for low, high in figures):
            idle.append(phrase)
        for start, end in spans:
            covered[start:end] = [True] * (end - start)
    loose = [text[max(0, low - 40) : high + 20] for low, high in figures if not all(covered[low:high])]
    return missing, loose, idle


@pytest.mark.parametrize("doc", DOCS)
def test_a_doc_is_what_make_docs_renders_from_the_records(doc):
    text = (REPO_ROOT / doc).read_text()
    assert text == render(text, StudyResults(REPO_ROOT)), f"{doc} differs from its render: run `make docs`"


REASONS = ("test: ", "record: ", "no record: ", "no result: ")
RECORD_DOC = re.compile(r"\b[\w/.-]+\.md\b")


def unrecorded(reason, phrases):
    """The figures of `phrases` (listed for `reason`, "record: ...") that none of the docs the reason names holds
    as written."""
    records = [(REPO_ROOT / path).read_text() for path in RECORD_DOC.findall(reason)]
    figures = []
    for phrase in phrases:
        _, masked = cleaned(phrase)
        figures += [masked[low:high] for low, high in result_figures(masked)]
    return [figure for figure in figures if records and not any(figure in record for record in records)]


@pytest.mark.parametrize("doc", RESULTS_DOCS)
def test_every_result_figure_outside_the_rendered_blocks_is_listed_with_its_test_or_record(doc):
    listed = [phrase for phrases in LOOSE[doc].values() for phrase in phrases]
    missing, loose, idle = unlisted((REPO_ROOT / doc).read_text(), listed)
    assert missing == [], f"{doc} no longer holds these listed phrases (tests/doc_figures.py)"
    assert loose == [], f"{doc}: result figures neither rendered nor listed in tests/doc_figures.py"
    assert idle == [], f"{doc}: phrases of tests/doc_figures.py that hold no result figure (they need no entry)"
    assert [reason for reason in LOOSE[doc] if not reason.startswith(REASONS)] == []
    tests = {reason.removeprefix("test: ") for reason in LOOSE[doc] if reason.startswith("test: ")}
    assert all(name in globals() for name in tests), tests - set(globals())
    for reason, phrases in LOOSE[doc].items():
        if reason.startswith("record: "):
            assert unrecorded(reason, phrases) == [], f"{doc}: figures that {reason!r} does not hold"


def wrong_verdicts(reason, results):
    """What a `verdict:` or `verdicts:` reason of `doc_figures.VERDICTS` states that the records do not give."""
    wrong = []
    if reason.startswith("verdict: "):
        for claim in reason.removeprefix("verdict: ").split("; "):
            spec, word = claim.rsplit(" is ", 1)
            name, arm, metric, *against = spec.split()
            if metric == "test_cross_entropy" and not against:  # the rule's own verdict
                computed = quoted(f"{name} {arm} {metric} verdict", results)
            else:  # another metric, or two arms: the rule's reading of the paired interval
                interval = quoted(" ".join([name, arm, metric, "interval", *against]), results)
                low, high = (
                    float(bound) * (1 if "cross_entropy" in metric else -1) for bound in interval[1:-1].split(", ")
                )
                computed = (
                    "level" if min(low, high) <= 0 <= max(low, high) else "worse" if min(low, high) > 0 else "pays"
                )
            if computed != word:
                wrong.append(f"{spec}: {computed}, not {word}")
    elif reason.startswith("verdicts: "):
        studies = reason.removeprefix("verdicts: ").removesuffix(" none pays").split(", ")
        wrong += [study for study in studies if " pays" in verdicts_summary(results, study)]
    return wrong


@pytest.mark.parametrize("doc", RESULTS_DOCS)
def test_every_verdict_in_words_is_listed_and_is_its_records(doc):
    listed = [phrase for phrases in VERDICTS[doc].values() for phrase in phrases]
    missing, loose, idle = unlisted((REPO_ROOT / doc).read_text(), listed, found=verdict_words)
    assert missing == [], f"{doc} no longer holds these phrases of tests/doc_figures.py's VERDICTS"
    assert loose == [], f"{doc}: verdicts in words neither rendered, quoted nor listed in tests/doc_figures.py"
    assert idle == [], f"{doc}: phrases of VERDICTS that hold no verdict word"
    assert [
        reason for reason in VERDICTS[doc] if not reason.startswith(("verdict: ", "verdicts: ", "no verdict: "))
    ] == []
    results = StudyResults(REPO_ROOT)
    assert {reason: wrong_verdicts(reason, results) for reason in VERDICTS[doc]} == dict.fromkeys(VERDICTS[doc], [])


def test_a_reversed_verdict_in_words_or_an_unquoted_count_of_seeds_fails():
    text = (REPO_ROOT / "README.md").read_text()
    listed = [phrase for phrases in VERDICTS["README.md"].values() for phrase in phrases]
    reversed_text = text.replace(
        "the local bias alone is worse than the twin", "the local bias alone is better than the twin"
    )
    missing, loose, _ = unlisted(reversed_text, listed, found=verdict_words)
    assert missing and any("better" in phrase for phrase in loose)
    results = StudyResults(REPO_ROOT)
    assert wrong_verdicts(f"verdict: {LOCAL_SPEC} is level", results) == [f"{LOCAL_SPEC}: worse, not level"]
    assert figures_of("below the twin at 0 of 5 seeds, and") == ["0 of 5 seeds"]
    assert figures_of("at <!-- quote: x -->0 of 5<!-- /quote --> seeds") == []


LOCAL_SPEC = 'translation-micro-deep-local none:local_bias="query" test_cross_entropy'


def figures_of(sentence):
    _, masked = cleaned(sentence)
    return [masked[low:high] for low, high in result_figures(masked)]


def test_the_prose_check_knows_a_result_figure_by_its_shape():
    """A score, a difference, a ratio, a mean ± std, a count of runs and a timing need an entry; a version, an
    identifier, a setting without a decimal part, a seed, a size, a commit and the paired statistics' levels do not."""
    results = (
        "It scores 78.68% accuracy / 85.67 F1 and BLEU 41 ± 2, +8% parameters, 0.91x BERT's speed, 1.66 x sd, "
        "36 runs, 32 GLUE runs, 210 fine-tuning runs, about 21 minutes, 2 hours, 30 s, about 2 points, -3 %."
    )
    assert figures_of(results) == ["78.68%", "85.67", "41", "2", "+8%", "0.91", "1.66", "36", "32", "210", "21",
                                   "2", "30", "2", "-3 %"]  # fmt: skip
    others = (
        "Python 3.11, transformers 4.56, torch 2.13.0, arXiv 2505.06708, 127.0.0.1, seeds 42-46, 6 layers, "
        "batch 32, lr 5e-5, commit 2402f03, 8,000 pieces, a 4-step run, 128/6+2/4/512, 95% interval, 80% power, "
        "the 5% level, `--max_steps 0.5`."
    )
    assert figures_of(others) == []


def test_a_changed_or_new_result_figure_in_prose_fails_and_a_setting_needs_no_entry():
    doc = (REPO_ROOT / "docs/RESULTS.md").read_text()
    listed = [phrase for phrases in LOOSE["docs/RESULTS.md"].values() for phrase in phrases]
    assert unlisted(doc, listed) == ([], [], [])
    changed = unlisted(doc.replace("78.68 accuracy / 85.67 F1", "78.70 accuracy / 85.67 F1", 1), listed)
    assert changed[0] == ["78.68 accuracy / 85.67 F1, against 78.68 / 85.71"] and "78.70" in changed[1][0]
    added = unlisted(doc + "\nOn RTE it scores 66.1 (seed 42), in 12 runs.\n", listed)
    assert len(added[1]) == 2 and "scores 66.1 (seed" in added[1][0] and "in 12 runs." in added[1][1]
    assert unlisted(doc.replace("seeds 42-46", "seeds 42-47", 1), listed) == ([], [], [])
    assert unlisted(doc, [*listed, "seeds 42-46"])[2] == ["seeds 42-46"]
    assert unrecorded("record: docs/MODELS.md", ["+13.0% |", "+13.5% |"]) == ["+13.5%"]


# A study figure written by hand: mean ± std, an interval, or a score with its unit.
HAND_FIGURE = re.compile(r"\d ± \d|\[[-+]?\d[\d.]*, [-+]?\d[\d.]*\]|\d (?:nats|BLEU|chrF)\b")
CARD_TEMPLATE = "model_cards/model_card_template.md"


@pytest.mark.parametrize("doc", [*METHOD_DOCS, "docs/TESTS.md", CARD_TEMPLATE])
def test_other_docs_quote_a_study_figure_only_as_a_quote(doc):
    text = QUOTE.sub("…", (REPO_ROOT / doc).read_text())
    assert HAND_FIGURE.findall(CODE_SPAN.sub("", text)) == []


def test_a_careless_edit_of_a_rendered_table_fails():
    doc = (REPO_ROOT / "docs/TRANSLATION.md").read_text()
    results = StudyResults(REPO_ROOT)
    swapped = doc.replace("| `deep` | 31.71", "| `global` | 31.71", 1)
    assert swapped != doc and render(swapped, results) == doc  # the render puts the labels back
    with pytest.raises(ValueError, match="'tabel' is not a block; the blocks: table, "):
        block("tabel translation-micro", results)
    with pytest.raises(ValueError, match="'nothing' is not a table of tooling/pages.py"):
        block("table nothing", results)


def test_a_quote_is_its_arms_result_with_its_sign():
    results = StudyResults(REPO_ROOT)
    spec = 'translation-micro-deep-output-gate none:output_gate="elementwise" test_cross_entropy'
    assert quoted(f"{spec} paired", results) == "+0.008 [-0.002, +0.017]"
    assert quoted(f"{spec} won", results) == "0 of 5"
    assert quoted(f"{spec} verdict", results) == "level"
    assert quoted(f"{spec} p", results) == "0.06"
    assert quoted("glue-minilm-cpu-mean finetune/deep_global mrpc_accuracy diffs", results) == (
        "+1.96, +0.74, +1.72, -0.49, -0.74"
    )
    with pytest.raises(ValueError, match="'rte_f1' is not a study"):
        quoted("rte_f1 none test_bleu diff", results)
    with pytest.raises(ValueError, match="arm 'deep' names 0 rows"):
        quoted("translation-micro-deep-output-gate deep test_bleu diff", results)
    with pytest.raises(ValueError, match="the kind 'mean' is not one of score, score-n, seeds"):
        quoted(f"{spec} mean", results)


# The figures those docs state outside the rendered blocks that the code computes (`doc_figures.LOOSE`).


def test_the_power_factors_at_five_seeds():
    """(t(0.975, 4) + t(0.80, 4)) / sqrt(5) = 1.66 x sd detected with 80% power; the half-width is 1.24 x sd."""
    differences = [0.1, -0.2, 0.3, 0.0, 0.4]
    assert f"{detectable_difference(differences) / statistics.stdev(differences):.2f}" == "1.66"
    assert f"{stats.t.ppf(0.975, 4) / math.sqrt(5):.2f}" == "1.24"


def test_the_gates_start_at_sigmoid_minus_four():
    """The default gate bias -4 starts every gate at sigmoid(-4) = 0.018, 1.8 %."""
    start = torch.sigmoid(torch.tensor(float(CasanConfig().gate_bias_init))).item()
    assert (f"{start:.3f}", f"{100 * start:.1f}") == ("0.018", "1.8")


def parameters(model_class, **size):
    """The parameters of `model_class` per context type and rank (None: full), built on the meta device."""
    arms = [("none", None), *((kind, rank) for kind in ("global", "deep", "deep_global") for rank in (None, 64))]
    with torch.device("meta"):
        return {
            arm: model_class(CasanConfig(context_type=arm[0], context_rank=arm[1], **size)).num_parameters()
            for arm in arms
        }


def test_the_parameters_the_context_adds():
    """The GLUE classifiers at MiniLM size (hidden 384, 6 layers, 2 labels): 22.71 M, `global` 24.49 M (+1.78 M,
    +8%), `deep` 27.15 M (+4.43 M), `deep_global` 28.92 M (+6.20 M, +27%); at rank 64 `deep` 23.70M and
    `deep_global` 24.05M (+1.34M). BERT-base's encoder: `deep` +71% and `deep_global` +84%, +6.9% and +8.1% at
    rank 64."""
    minilm = {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536}
    counts = parameters(CasanForSequenceClassification, num_labels=2, **minilm)
    base = counts[("none", None)]
    millions = {arm: f"{count / 1e6:.2f}" for arm, count in counts.items()}
    added = {arm: f"+{(count - base) / 1e6:.2f}" for arm, count in counts.items()}
    assert millions[("none", None)] == "22.71"
    assert [millions[(kind, None)] for kind in ("global", "deep", "deep_global")] == ["24.49", "27.15", "28.92"]
    assert [added[(kind, None)] for kind in ("global", "deep", "deep_global")] == ["+1.78", "+4.43", "+6.20"]
    assert (millions[("deep", 64)], millions[("deep_global", 64)], added[("deep_global", 64)]) == (
        "23.70",
        "24.05",
        "+1.34",
    )
    percent = {arm: 100 * (count - base) / base for arm, count in counts.items()}
    assert (round(percent[("global", None)]), round(percent[("deep_global", None)])) == (8, 27)
    bert = parameters(CasanModel)
    percent = {arm: 100 * (count - bert[("none", None)]) / bert[("none", None)] for arm, count in bert.items()}
    assert [round(percent[("deep", None)]), round(percent[("deep_global", None)])] == [71, 84]
    assert [f"{percent[('deep', 64)]:.1f}", f"{percent[('deep_global', 64)]:.1f}"] == ["6.9", "8.1"]


def test_the_causal_study_s_llama():
    """The causal study's Llama (docs/CAUSAL.md), as its records built it: the `micro` size, the vocabulary of its
    tokenizer, embeddings untied: 1.57M parameters without context (1.6M, README)."""
    record = study_records("clm-tinyshakespeare-cpu", REPO_ROOT)[0]
    sizes = MODEL_SIZES[record["model_size"]]
    config = LlamaConfig(vocab_size=record["settings"]["vocab_size"], tie_word_embeddings=False, **sizes)
    with torch.device("meta"):
        count = LlamaForCausalLM(config).num_parameters() / 1e6
    assert (f"{count:.2f}", f"{count:.1f}") == ("1.57", "1.6")


def test_the_glue_dev_sets_and_what_one_example_weighs():
    """RTE 277 pairs (0.36 points each), MRPC 408 (0.25), SST-2 872 sentences (0.11), as the records evaluated."""
    records = study_records("glue-minilm-cpu-mean", REPO_ROOT)
    sizes = {
        task: {record["eval_samples"] for record in records if record["task"] == task}
        for task in ("rte", "mrpc", "sst2")
    }
    assert sizes == {"rte": {277}, "mrpc": {408}, "sst2": {872}}
    assert [f"{100 / size:.2f}" for size in (277, 408, 872)] == ["0.36", "0.25", "0.11"]


def test_the_output_gate_studys_twin_is_micro_deeps():
    """The output-gate study ran its twin again: every score of every seed equals the micro-deep study's."""
    twins = {}
    for name in ("translation-micro-deep", "translation-micro-deep-output-gate"):
        for comparison in StudyResults(REPO_ROOT).comparisons(name):
            twin_runs = next(runs for labels, runs, twin in comparison.rows if twin is None)
            twins.setdefault(name, {})[comparison.metric] = comparison.scores(twin_runs)
    assert twins["translation-micro-deep"] == twins["translation-micro-deep-output-gate"]
