"""The figures the docs state are the records' and the code's (docs/TESTS.md, "Figures in the docs"): README.md,
docs/RESULTS.md, docs/TRANSLATION*.md and docs/CAUSAL.md (and the quotes of docs/METHOD.md and docs/TESTS.md) are,
character for character, what `make docs` renders from the committed records (`tooling/render.py`): every table whole,
each quote with its sign, every verdict. Outside the rendered blocks and quotes, each result figure of those docs
(`result_figures`: a number with a decimal part, a percentage, a ratio, a mean ± std, a count of runs, a timing) stands
in a phrase of `doc_figures.LOOSE`, listed with the test here that computes it or the record that holds it; each
sentence that states a result in words (`VERDICT_WORD`) is listed whole in `doc_figures.VERDICTS` with what it says,
checked against the records; and the other docs quote no study figure by hand."""

import json
import math
import re
import statistics

import pytest
import torch
from conftest import REPO_ROOT
from doc_figures import LOCAL, LOOSE, VERDICTS
from scipy import stats
from transformers import LlamaConfig, LlamaForCausalLM

from casan_hf import CasanConfig, CasanForSequenceClassification, CasanModel
from casan_hf.studies import detectable_difference
from casan_hf.studies.causal import MODEL_SIZES
from tooling.catalog import STUDIES, study_records
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
# A word that states a result (`doc_figures.VERDICTS`): a verdict (pays, worse, level, better), a gain, a loss, a
# help, a cost, what a difference buys or adds, or whether it is measurable, beyond the spread or leans one way.
VERDICT_WORD = re.compile(
    r"(?<![\w-])(?:pays?|paid|paying|worse|better|level|buys?|bought|costs?|adds? nothing|no effect"
    r"|does not (?:move|add)|helps?|helped|hurts?|gains?|gained|loses?|no loss|measurabl[ey]|beyond the spread"
    r"|improves?|improved|improvements?|outperforms?|ahead|leans?|no difference)(?![\w-])",
    re.IGNORECASE,
)
# Where a block of prose begins: after a blank line, or at a list item, a heading or a table row (whose marker is
# not part of the block's first sentence).
BLOCK_START = re.compile(r"\n[ \t]*\n|\n(?=[ \t]*(?:[-*] |\d+\. |#|\|))")
BLOCK_MARKER = re.compile(r"^(?:#+|[-*]|\d+\.)\s+")
# The end of a sentence: ".", "?" or "!" (closing emphasis, a parenthesis or a quotation mark allowed) before a
# sentence that does not begin in lower case; not "e.g." or "i.e.".
SENTENCE_BREAK = re.compile(r"(?:(?<=[.?!])|(?<=[.?!][*)\"'])|(?<=[.?!]\*\*))(?<!e\.g\.)(?<!i\.e\.)\s+(?=[^\sa-z])")


def prose(text):
    """The prose of a doc, its lines kept: without rendered blocks, quotes (each left as `…`), code, comments and
    link targets."""
    text = RENDER.sub("\n\n", text)
    text = QUOTE.sub("…", text)
    text = INDENTED_CODE.sub(" ", FENCE.sub("\n\n", text))
    return LINK_TARGET.sub("]", COMMENT.sub(" ", text))


def masked_code(text):
    """`text` with each code span's characters masked, where tokens are looked for."""
    return CODE_SPAN.sub(lambda span: "`" + "x" * (len(span.group()) - 2) + "`", text)


def cleaned(text):
    """The prose of a doc as one line, and the same with its code spans masked."""
    text = " ".join(prose(text).split())
    return text, masked_code(text)


def sentences(text):
    """The sentences of a doc's prose, each on one line: its paragraphs, list items, headings and table rows split
    at each sentence's end."""
    found = []
    for lines in BLOCK_START.split(prose(text)):
        paragraph = BLOCK_MARKER.sub("", " ".join(lines.split()))
        found += [sentence for sentence in SENTENCE_BREAK.split(paragraph) if sentence]
    return found


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


def unlisted(doc_text, listed):
    """`(missing, loose, idle)`: the phrases of `listed` that the doc's prose does not hold, each result figure of the
    prose that no listed phrase holds (with its neighbourhood), and the phrases that hold none."""
    text, masked = cleaned(doc_text)
    figures = result_figures(masked)
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
VERDICT_REASONS = ("verdict: ", "verdicts: ", "no verdict: ", "no record: ")
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


def unheld_verdicts(doc_text, listed):
    """`(missing, loose, idle)`: the sentences of `listed` that the doc's prose does not hold whole, each sentence of
    the prose with a verdict word that is not listed, and the listed sentences with none."""
    stated = sentences(doc_text)
    missing = [sentence for sentence in listed if sentence not in stated]
    loose = [sentence for sentence in stated if VERDICT_WORD.search(masked_code(sentence)) and sentence not in listed]
    idle = [sentence for sentence in listed if sentence in stated and not VERDICT_WORD.search(masked_code(sentence))]
    return missing, loose, idle


def listed_verdicts(doc):
    return [sentence for sentences_listed in VERDICTS[doc].values() for sentence in sentences_listed]


@pytest.mark.parametrize("doc", RESULTS_DOCS)
def test_every_verdict_in_words_is_listed_and_is_its_records(doc):
    missing, loose, idle = unheld_verdicts((REPO_ROOT / doc).read_text(), listed_verdicts(doc))
    assert missing == [], f"{doc} no longer holds these sentences of tests/doc_figures.py's VERDICTS, word for word"
    assert loose == [], f"{doc}: sentences stating a result in words, neither rendered, quoted nor listed in VERDICTS"
    assert idle == [], f"{doc}: sentences of VERDICTS that hold no verdict word"
    assert [reason for reason in VERDICTS[doc] if not reason.startswith(VERDICT_REASONS)] == []
    results = StudyResults(REPO_ROOT)
    assert {reason: wrong_verdicts(reason, results) for reason in VERDICTS[doc]} == dict.fromkeys(VERDICTS[doc], [])


# Verdicts in words reversed, each on its page: whatever the words, the page no longer holds its listed sentence.
REVERSALS = (
    ("docs/RESULTS.md", "this budget, nothing measurable.", "this budget, a clear gain."),
    ("docs/RESULTS.md", "at rank 64 loses nothing measurable", "at rank 64 loses measurably"),
    (
        "docs/TRANSLATION_DEEP.md",
        "no length where the context helps beyond the spread, and no hint\nthat it helps long sentences more",
        "a length where the context helps beyond the spread, and a hint\nthat it helps long sentences more",
    ),
    ("docs/TRANSLATION_DEEP.md", "Nothing moves beyond the spread, and", "Test BLEU moves beyond the spread, and"),
    ("docs/TRANSLATION_BEYOND.md", "At this size it neither helps\n  nor hurts.", "At this size it helps."),
    ("docs/CAUSAL.md", "neither context pays beyond the spread", "both contexts pay beyond the spread"),
    ("README.md", "the local bias alone is worse than the twin", "the local bias alone is better than the twin"),
)


@pytest.mark.parametrize(("doc", "verdict", "reversed_verdict"), REVERSALS)
def test_a_reversed_verdict_in_words_fails_whatever_its_words(doc, verdict, reversed_verdict):
    text = (REPO_ROOT / doc).read_text()
    assert unheld_verdicts(text, listed_verdicts(doc)) == ([], [], [])
    assert verdict in text
    missing, loose, _ = unheld_verdicts(text.replace(verdict, reversed_verdict), listed_verdicts(doc))
    assert [sentence for sentence in missing if " ".join(verdict.split()) in sentence] != []
    assert [sentence for sentence in loose if " ".join(reversed_verdict.split()) in sentence] != []


def test_a_wrong_verdict_or_an_unquoted_count_of_seeds_fails():
    results = StudyResults(REPO_ROOT)
    assert wrong_verdicts(f"verdict: {LOCAL} is level", results) == [f"{LOCAL}: worse, not level"]
    assert figures_of("below the twin at 0 of 5 seeds, and") == ["0 of 5 seeds"]
    assert figures_of("at <!-- quote: x -->0 of 5<!-- /quote --> seeds") == []


def test_the_verdict_check_reads_each_sentence_whole():
    """A sentence ends at ".", "?" or "!" (after bold or a parenthesis too) before one that does not begin in lower
    case; a list item, a heading and a paragraph begin one; "e.g." and a quote do not end one."""
    text = (
        "# Does it pay? Five seeds\n\nShort: **nothing measurable.** Every arm is level, e.g. `global`.\n"
        "- **Rank 64** loses <!-- quote: x -->0.1<!-- /quote --> points.\n"
    )
    assert sentences(text) == [
        "Does it pay?",
        "Five seeds",
        "Short: **nothing measurable.**",
        "Every arm is level, e.g. `global`.",
        "**Rank 64** loses … points.",
    ]


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


def test_the_confirmatory_study_s_reasons_and_power_aim():
    """What docs/CAUSAL.md's confirmatory study gives as its reasons and aim, from the first study's records: the
    twin's test cross-entropy 4.76, its validation cross-entropy near 4.6 at the end; twenty seeds detect 0.66 x sd
    with 80% power, and `global`'s paired differences spread with an sd of 0.031 nats, which gives 0.021."""
    records = study_records("clm-tinyshakespeare-cpu", REPO_ROOT)
    by_arm = {}
    for record in records:
        by_arm.setdefault(record["variant"], {})[record["seed"]] = record["test_cross_entropy"]
    twin, context = by_arm["none"], by_arm["global:gate_bias_init=0.0,gate_per_head=true"]
    assert f"{statistics.mean(twin.values()):.2f}" == "4.76"
    twin_validation = [record["validation_cross_entropy"] for record in records if record["variant"] == "none"]
    assert f"{statistics.mean(twin_validation):.1f}" == "4.6"
    spread = statistics.stdev(context[seed] - twin[seed] for seed in twin)
    factor = (stats.t.ppf(0.975, 19) + stats.t.ppf(0.80, 19)) / math.sqrt(20)
    assert (f"{factor:.2f}", f"{spread:.3f}", f"{factor * spread:.3f}") == ("0.66", "0.031", "0.021")


def test_the_confirmatory_study_s_budget():
    """The twin's seed-0 curve (docs/results/clm_tinyshakespeare_confirm_budget.json): lowest, 4.156, at step 550 of a
    1,500-step schedule, four evaluations above it after, stopped at step 773; the study's grid trains 550 steps."""
    budget = json.loads((REPO_ROOT / "docs/results/clm_tinyshakespeare_confirm_budget.json").read_text())
    lowest = budget["lowest"]
    assert (lowest["step"], f"{lowest['validation_cross_entropy']:.3f}") == (550, "4.156")
    after = [point for point in budget["curve"] if point["step"] > lowest["step"]]
    assert len(after) == 4 and (budget["max_steps"], budget["steps"]) == (1500, 773)
    (grid,) = STUDIES["clm-tinyshakespeare-confirm"].grids
    assert grid[grid.index("--max_steps") + 1] == str(lowest["step"])


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


def test_the_confirmatory_study_has_all_its_runs():
    """All 60 runs of the confirmatory study (docs/CAUSAL.md): its three arms at each of the twenty seeds 6 to 25,
    once each, the whole budget of 550 steps."""
    records = study_records("clm-tinyshakespeare-confirm", REPO_ROOT)
    runs = sorted((record["variant"], record["seed"]) for record in records)
    arms = sorted({variant for variant, _ in runs})
    assert len(arms) == 3 and runs == [(arm, seed) for arm in arms for seed in range(6, 26)]
    assert {record["steps"] for record in records} == {550}


def test_the_confirmatory_study_s_arms_add_the_same_parameters():
    """Both context arms of the confirmatory study (docs/CAUSAL.md), built with their records' options: +8.4% of the
    twin's parameters each, rank 64 as many as full rank at this width (128 -> 64 -> 128 against 128 x 128)."""
    from casan_hf import CasanLlamaConfig, CasanLlamaForCausalLM

    records = study_records("clm-tinyshakespeare-confirm", REPO_ROOT)
    options = {record["variant"]: record["context_options"] for record in records}
    sizes = MODEL_SIZES[records[0]["model_size"]]
    vocab_size = records[0]["settings"]["vocab_size"]
    counts = {}
    for variant, context in options.items():
        config = CasanLlamaConfig(vocab_size=vocab_size, tie_word_embeddings=False, **sizes, **context)
        with torch.device("meta"):
            counts[variant] = CasanLlamaForCausalLM(config).num_parameters()
    twin = counts.pop("none")
    assert {f"+{100 * (count - twin) / twin:.1f}%" for count in counts.values()} == {"+8.4%"}, counts


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
