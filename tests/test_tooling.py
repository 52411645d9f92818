"""The repository's tooling (tooling/, docs/CODE.md): its modules import each other one way, with no circle; a
render reads the records as they are when it starts (no cache outlives it); README's text stays in README, a
template whose placeholders are figures; a release of an unknown kind is refused; and the translation card parses
its record's command line as the script does, `--flag=value` included; the test files' times add up from a
durations log."""

import ast
import json
import shutil

import pytest
from conftest import REPO_ROOT

from casan_hf.studies import causal
from tooling import file_seconds, release
from tooling.catalog import STUDIES
from tooling.render import block
from tooling.results import StudyResults


TOOLING = REPO_ROOT / "tooling"


def tooling_imports(path):
    """The tooling modules that the module at `path` imports (relative imports, or `tooling.NAME`)."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            imported |= {node.module} if node.module else {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tooling."):
            imported.add(node.module.removeprefix("tooling."))
    return imported


def test_the_tooling_imports_one_way():
    graph = {path.stem: tooling_imports(path) for path in TOOLING.glob("*.py") if path.stem != "__init__"}
    ordered = []
    while graph:
        ready = sorted(name for name, needs in graph.items() if needs <= set(ordered))
        assert ready, f"an import circle among {sorted(graph)}"
        ordered += ready
        graph = {name: needs for name, needs in graph.items() if name not in ready}
    assert ordered.index("tables") < ordered.index("pages") < ordered.index("render")


def copy_results(repository, name):
    path = repository / STUDIES[name].results
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_ROOT / STUDIES[name].results, path)
    return path


def test_a_render_reads_the_records_as_they_are_when_it_starts(tmp_path):
    path = copy_results(tmp_path, "glue-minilm-h100")
    assert block("template\n| {runs glue-minilm-h100} |", StudyResults(tmp_path)) == "| 36 |\n"
    path.write_text(json.dumps(json.loads(path.read_text())[:30]))
    assert block("template\n| {runs glue-minilm-h100} |", StudyResults(tmp_path)) == "| 30 |\n"


def test_a_studys_seeds_done_are_those_every_arm_has_run(tmp_path):
    """`{seeds-done STUDY}`: the seeds of the arm with the fewest, so that an interim verdict names what it rests
    on."""
    path = copy_results(tmp_path, "translation-micro-deep")
    records = json.loads(path.read_text())
    spec = "template\n{runs translation-micro-deep} runs, {seeds-done translation-micro-deep} seeds"
    assert block(spec, StudyResults(tmp_path)) == f"{len(records)} runs, 5 seeds\n"
    twin_seed_5 = next(r for r in records if r["variant"] == "none" and r["seed"] == 5)
    path.write_text(json.dumps([r for r in records if r is not twin_seed_5]))
    assert block(spec, StudyResults(tmp_path)) == f"{len(records) - 1} runs, 4 seeds\n"


def test_a_verdict_is_its_own_study_s_rule():
    """A study's verdict, quoted or summed up, is the decision rule its sweep wrote before its runs: the causal
    study's (test and validation cross-entropy) where the translation studies' would ask for a BLEU it has not; a
    study without a rule is refused by name."""
    results = StudyResults(REPO_ROOT)
    name, arm = "clm-tinyshakespeare-cpu", "global:gate_bias_init=0.0,gate_per_head=true"
    labels = next(labels for labels, *_ in results.comparison(name, "test_cross_entropy").rows if labels[-1] == arm)
    expected = causal.rule_verdict(results.comparisons(name), labels)
    assert block(f"template\n{{verdicts {name}}}", results).startswith(f"`{arm}` {expected}, ")
    with pytest.raises(ValueError, match="glue-minilm-h100 is a glue study, with no decision rule"):
        block("template\n{verdicts glue-minilm-h100}", results)


def test_a_template_keeps_its_text_and_fills_its_figures():
    spec = "template\n| arm | RTE |\n| --- | --- |\n| `deep` | {glue-minilm-h100 finetune/deep rte_accuracy score} |"
    assert block(spec, StudyResults(REPO_ROOT)) == "| arm | RTE |\n| --- | --- |\n| `deep` | 56.56 ± 2.35 |\n"
    readme = (REPO_ROOT / "README.md").read_text()
    assert readme.count("<!-- render: template\n") == 3 and "{verdicts-in-words translation-micro-deep}" in readme


def test_a_release_of_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="the kind 'glu' is not one of conversion, glue, translation"):
        release.Release("x", "glu", {})


def test_the_translation_card_parses_its_records_command_line_as_the_script_does(tmp_path):
    """The recorded command line with every `--flag value` written `--flag=value` gives the same card."""
    (item,) = [item for item in release.releases() if item.kind == "translation"]
    path = copy_results(tmp_path, item.study)
    records = json.loads(path.read_text())
    record = release.find_record(item, records)
    argv = record["received"]["argv"]
    joined, index = [argv[0]], 1
    while index < len(argv):
        takes_value = index + 1 < len(argv) and not argv[index + 1].startswith("--")
        joined.append(f"{argv[index]}={argv[index + 1]}" if takes_value else argv[index])
        index += 2 if takes_value else 1
    assert joined != argv and any(token.startswith("--warmup_steps=") for token in joined)
    record["received"]["argv"] = joined
    path.write_text(json.dumps(records))
    card = release.render_card(item, None, repository=tmp_path)
    assert card == (REPO_ROOT / item.card).read_text(encoding="utf-8")


def test_a_cost_is_the_benchmark_records_ratio_over_bert(tmp_path):
    """`{cost FILE KIND FIELD}` reads a `scripts/benchmark.py --json` record: the parameters a kind adds over the
    reference model's, its eager speed over BERT's (wall clock, then CPU time); a kind or field the record lacks is
    named."""
    from tooling.quotes import filled

    def row(context_type, mode, params, ratio, cpu_ratio, local_params=0, compile_mode=None):
        return {
            "model": f"casan {context_type}",
            "context_type": context_type,
            "mode": mode,
            "params": params,
            "local_params": local_params,
            "compile_mode": compile_mode,
            "ratio_vs_bert": ratio,
            "cpu_ratio_vs_bert": cpu_ratio,
        }

    records = [
        row(None, "inference", 1000, 1.0, 1.0),
        row("global", "inference", 1130, 0.9812, 0.9749),
        row("global", "inference", 1130, 1.5, 1.5, compile_mode="default"),
        row(None, "training", 1000, 1.0, 1.0),
        row("global", "training", 1130, 0.951, 0.96),
        row("deep_global", "training", 1871, 0.8449, 0.851, local_params=30),
    ]
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "bench.json").write_text(json.dumps(records))
    results = StudyResults(tmp_path)
    assert filled("cost bench.json global params", results) == "+13.0%"
    assert filled("cost bench.json global inference", results) == "0.98 (0.97)"
    assert filled("cost bench.json deep_global+local training", results) == "0.84 (0.85)"
    with pytest.raises(ValueError, match="no eager 'deep'; its kinds: None, deep_global\\+local, global"):
        filled("cost bench.json deep params", results)
    with pytest.raises(ValueError, match="no inference run of 'deep_global\\+local'"):
        filled("cost bench.json deep_global+local inference", results)
    with pytest.raises(ValueError, match="'speed' is not one of params, inference, training"):
        filled("cost bench.json global speed", results)


def test_file_seconds_adds_up_each_files_tests_from_a_durations_log():
    log = (
        "12.50s call     tests/test_a.py::test_one[x-y]\n"
        "0.50s setup    tests/test_a.py::test_one[x-y]\n"
        "3.00s call     tests/test_b.py::Case::test_two\n"
        "============ 2 passed in 16.00s ============\n"
    )
    assert file_seconds.file_seconds(log) == {"tests/test_a.py": 13.0, "tests/test_b.py": 3.0}
    with pytest.raises(ValueError, match="--durations=0"):
        file_seconds.file_seconds("2 passed in 1.00s\n")


def test_file_seconds_reads_back_what_it_writes(tmp_path):
    listed = tmp_path / "file_seconds.txt"
    listed.write_text(file_seconds.HEADER + "13 tests/test_a.py\n3 tests/test_b.py\n\n", encoding="utf-8")
    assert file_seconds.read(listed) == {"tests/test_a.py": 13.0, "tests/test_b.py": 3.0}
