"""The docs' results, rendered from the committed records (`make docs`, `python -m tooling.render`): in README.md,
docs/RESULTS.md, docs/TRANSLATION*.md, docs/CAUSAL.md (and the quotes of docs/METHOD.md and docs/TESTS.md), each block
between `<!-- render: NAME ARGS -->` and `<!-- /render -->` is what `BLOCKS[NAME](results, *ARGS)` writes from the
records (a table whole: row labels, per-seed scores, means and spreads, paired intervals, seeds won, p-values, powers,
verdicts, run times); a `template` block's ARGS are the lines of its marker, markdown whose `{SPEC}` placeholders are
figures (`tables.Template`), so that the text around README's figures stays in README; and each `<!-- quote: SPEC
-->TEXT<!-- /quote -->` in the prose is `quotes.filled`. Every figure comes from the functions the studies' own tables
use (`paired`, `glue`, `translation`, `gates`). docs/TESTS.md, "Figures in the docs", says what the tests hold the docs
to."""

import re
import sys
from pathlib import Path

from casan_hf.studies.glue import wall_times
from casan_hf.studies.translation import budgets, gates_per_layer, present_variants, runs_by_commit

from .pages import PAGES
from .quotes import QUOTE_PATTERN, arm_row, filled, quoted
from .results import StudyResults
from .tables import Template, markdown_row


REPOSITORY = Path(__file__).resolve().parents[1]
TRANSLATION_DOCS = ("docs/TRANSLATION.md", "docs/TRANSLATION_DEEP.md", "docs/TRANSLATION_BEYOND.md")
METHOD_DOCS = ("docs/METHOD.md", "docs/FAMILIES.md", "docs/BEYOND.md")
DOCS = (
    "README.md",
    "docs/RESULTS.md",
    *TRANSLATION_DOCS,
    "docs/CAUSAL.md",
    "docs/BENCHMARKS.md",
    *METHOD_DOCS,
    "docs/TESTS.md",
)
# A block takes its opening marker's indentation, so that a list rendered inside a bullet stays in that bullet.
RENDER = re.compile(r"^([ \t]*)(<!-- render: (.+?)\s-->\n)(.*?)(^[ \t]*<!-- /render -->)", re.DOTALL | re.MULTILINE)
QUOTE = re.compile(QUOTE_PATTERN, re.DOTALL)


def one_budget(results, name):
    found = budgets(results.records(name))
    if len(found) != 1:
        raise ValueError(f"{name} has {len(found)} budgets; name one.")
    return found[0][2]


def table_block(results, name):
    """A table of `pages.PAGES`."""
    if name not in PAGES:
        raise ValueError(f"{name!r} is not a table of tooling/pages.py: {', '.join(PAGES)}.")
    return PAGES[name].render(results)


def runs_block(results, name):
    """The runs of a study per commit: how many, when, how long (`translation.runs_by_commit`)."""
    return runs_by_commit(one_budget(results, name))


def gates_block(results, name, task=None):
    """The final gates per layer of each arm (`translation.gates_per_layer`), of one GLUE `task`'s fine-tuning."""
    if task is None:
        records = one_budget(results, name)
    else:
        records = [r for r in results.records(name) if (r["task"], r["recipe"]) == (task, "finetune")]
    return gates_per_layer(records, present_variants(records))


def lengths_block(results, name, arm):
    """Test BLEU by source length of `arm` against the twin: each bucket's sentences, paired difference, seeds."""
    lines = [
        "| source words | sentences | paired diff in BLEU [95% interval] | seeds won |",
        "| --- | --- | --- | --- |",
    ]
    counts = next(record["test_by_length"] for record in one_budget(results, name) if "test_by_length" in record)
    for bucket, count in counts.items():
        spec = f"{name} {arm} test_bleu_{bucket}"
        lines.append(
            markdown_row(
                [bucket, str(count["sentences"]), quoted(f"{spec} paired", results), quoted(f"{spec} won", results)]
            )
        )
    return "\n".join(lines) + "\n"


def seed_gates_block(results, name, arm, layer):
    """Per seed of `arm`: its final query and key gate of encoder layer `layer`, and its test BLEU."""
    comparison = results.comparison(name, "test_bleu")
    runs = sorted(arm_row(comparison, arm)[1], key=lambda run: run["seed"])
    lines = [
        f"| seed | query gate, layer {layer} | key gate, layer {layer} | test BLEU |",
        "| --- | --- | --- | --- |",
    ]
    for run in runs:
        gates = [f"{run['gates'][target][int(layer)]:.3f}" for target in ("query", "key")]
        lines.append(markdown_row([str(run["seed"]), *gates, f"{comparison.score(run):.{comparison.digits}f}"]))
    return "\n".join(lines) + "\n"


BLOCKS = {
    "table": table_block,
    "template": lambda results, *lines: Template(lines).render(results),
    "runs": runs_block,
    "gates": gates_block,
    "lengths": lengths_block,
    "seed-gates": seed_gates_block,
    "wall-times": lambda results, name: wall_times(results.records(name)),
}


def block(spec, results):
    """What the block `spec` (`NAME ARGS`: ARGS split at white space, or at line ends for a `template`) renders; a
    ValueError naming the blocks there are."""
    name, rest = (spec.split(maxsplit=1) + [""])[:2]
    args = rest.splitlines() if name == "template" else rest.split()
    if name not in BLOCKS:
        raise ValueError(f"render {spec!r}: {name!r} is not a block; the blocks: {', '.join(BLOCKS)}.")
    try:
        return BLOCKS[name](results, *args)
    except (TypeError, ValueError) as error:
        raise ValueError(f"render {spec!r}: {error}") from None


def indented(lines, indentation):
    """`lines` with `indentation` before each line that is not blank."""
    return "".join(indentation + line if line.strip() else line for line in lines.splitlines(keepends=True))


def render(text, results):
    """`text` with every block and quote as `results` (a `StudyResults`) give it."""

    def rendered_block(match):
        indentation, opening, spec, _, closing = match.groups()
        return indentation + opening + indented(block(spec, results), indentation) + indentation + closing.lstrip()

    text = RENDER.sub(rendered_block, text)
    return QUOTE.sub(
        lambda match: f"<!-- quote: {match.group(1)} -->{filled(match.group(1), results)}<!-- /quote -->", text
    )


def main(repository=REPOSITORY):
    """`make docs`: writes each doc as its render; prints the docs it changed."""
    results = StudyResults(repository)
    for doc in DOCS:
        path = Path(repository) / doc
        text = path.read_text()
        rendered = render(text, results)
        if rendered != text:
            path.write_text(rendered)
            print(f"rendered {doc}")


if __name__ == "__main__":
    sys.exit(main())
