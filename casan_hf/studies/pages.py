"""The results tables of README.md, docs/RESULTS.md and docs/TRANSLATION.md, by the name their
`<!-- render: table NAME -->` block gives (`render`): which study, arms and row labels, which columns. A cell is a
quote kind (`quotes.ARM_KINDS`, `quotes.PAIRED_KINDS`, `verdict`) or a `render.RUN_CELLS` kind; README's tables
are templates whose `{SPEC}` placeholders are quotes or `render.SUMMARIES`."""

from .render import ArmTable, MetricTable, RunsTable, Template


GLUE = "glue-minilm-cpu-mean"
GLUE_ARMS = (
    ("finetune/none", "`none` (twin)"),
    ("finetune/global", "`global`"),
    ("finetune/deep_global", "`deep_global`"),
)


def glue_columns(metric, with_runs=True):
    """The CPU GLUE study's columns of one task and metric: per-seed scores, the paired figures, gates and time."""
    columns = (
        ("seeds 42-46", metric, "seeds"),
        ("mean ± std", metric, "score"),
        ("paired diff to `none`", metric, "spread"),
        ("95% interval", metric, "interval"),
        ("seeds won", metric, "won"),
        ("sign test p", metric, "p"),
        ("detectable diff (80% power)", metric, "power"),
    )
    return columns + (
        (("final gates q / k", metric, "gates"), ("train time (median)", metric, "train-time")) * with_runs
    )


MICRO_DEEP = "translation-micro-deep"
AUTHORS = "gate_bias_init=0.0,gate_per_head=true"
MICRO_DEEP_ARMS = (
    ("none", "`none`"),
    ("deep_global", "`deep_global` (bias -4, shared gate)"),
    (f"deep_global:{AUTHORS}", "`deep_global`, the authors' gate (bias 0, per head)"),
    (f"global:{AUTHORS}", "`global`, the authors' gate (bias 0, per head)"),
)
OUTPUT_GATE = "translation-micro-deep-output-gate"
TOKEN_GATE = 'none:output_gate="elementwise"'
CONTEXT_GATE = 'global:context_targets=[],output_gate="elementwise",output_gate_context=true'
START = "deep_global:gate_bias_init=0.0"


PAGES = {
    # docs/RESULTS.md: the CPU GLUE study, one table per task and metric.
    "glue-rte-accuracy": ArmTable(GLUE, "RTE accuracy", GLUE_ARMS, glue_columns("rte_accuracy")),
    "glue-mrpc-accuracy": ArmTable(GLUE, "MRPC accuracy", GLUE_ARMS, glue_columns("mrpc_accuracy")),
    "glue-mrpc-f1": ArmTable(GLUE, "MRPC F1", GLUE_ARMS, glue_columns("mrpc_f1", with_runs=False)),
    "glue-sst2-accuracy": ArmTable(GLUE, "SST-2 accuracy", GLUE_ARMS, glue_columns("sst2_accuracy")),
    "glue-rte-mlm": ArmTable(
        GLUE,
        "RTE accuracy, `mlm` recipe",
        (("mlm/none", "`none` (twin)"), ("mlm/deep_global", "`deep_global`")),
        (
            ("seeds", "rte_accuracy", "seeds"),
            ("paired diff to `none`", "rte_accuracy", "diff"),
            ("masked-LM perplexity", "rte_accuracy", "perplexity"),
            ("train time", "rte_accuracy", "train-time"),
        ),
    ),
    # docs/TRANSLATION.md
    "translation-micro": ArmTable(
        "translation-micro",
        "variant",
        (("none", "`none`"), ("global", "`global`"), ("deep", "`deep`"), ("deep_global", "`deep_global`")),
        (
            ("test BLEU", "test_bleu", "score-n"),
            ("chrF", "test_chrf", "score"),
            ("paired diff in BLEU to `none` (per seed)", "test_bleu", "diffs"),
            ("mean diff, 95% interval", "test_bleu", "paired"),
            ("seeds won", "test_bleu", "won"),
            ("sign test p", "test_bleu", "p"),
            ("detectable diff (80% power)", "test_bleu", "power"),
            ("val BLEU", "validation_bleu", "score"),
        ),
    ),
    "translation-micro-deep-runs": RunsTable(
        MICRO_DEEP,
        MICRO_DEEP_ARMS,
        (
            ("test CE", "test_cross_entropy"),
            ("val CE", "validation_cross_entropy"),
            ("test BLEU", "test_bleu"),
            ("chrF", "test_chrf"),
        ),
    ),
    "translation-micro-deep-arms": ArmTable(
        MICRO_DEEP,
        "arm",
        MICRO_DEEP_ARMS,
        (
            ("test CE (nats), mean ± std", "test_cross_entropy", "score"),
            ("paired test CE [95% interval]", "test_cross_entropy", "paired"),
            ("% of the twin", "test_cross_entropy", "percent"),
            ("seeds won", "test_cross_entropy", "won"),
            ("detectable test CE diff (80% power)", "test_cross_entropy", "power"),
            ("verdict", "test_cross_entropy", "verdict"),
            ("val CE", "validation_cross_entropy", "paired"),
            ("test BLEU", "test_bleu", "paired"),
            ("chrF", "test_chrf", "paired"),
        ),
    ),
    "translation-micro-start": MetricTable(
        "translation-micro-start",
        START,
        "metric",
        "`deep_global`, bias 0",
        (
            ("test cross-entropy (primary, nats)", "test_cross_entropy"),
            ("validation cross-entropy", "validation_cross_entropy"),
            ("test BLEU (beam 5)", "test_bleu"),
            ("test chrF", "test_chrf"),
        ),
        (
            ("paired difference", "spread"),
            ("95% interval", "interval"),
            ("seeds won", "won"),
            ("detectable diff (80% power)", "power"),
        ),
    ),
    "translation-micro-deep-output-gate": ArmTable(
        OUTPUT_GATE,
        "arm (5 seeds each)",
        (
            ("none", "`none`"),
            (TOKEN_GATE, "token-only gate (the anchor's)"),
            (CONTEXT_GATE, "gate driven by the global context"),
        ),
        (
            ("test CE", "test_cross_entropy", "score"),
            ("paired to `none` [95% interval]", "test_cross_entropy", "paired"),
            ("seeds better", "test_cross_entropy", "won"),
            ("sign test p", "test_cross_entropy", "p"),
            ("power (80%)", "test_cross_entropy", "power"),
            ("verdict", "test_cross_entropy", "verdict"),
            ("val CE paired", "validation_cross_entropy", "diff"),
            ("test BLEU paired", "test_bleu", "paired"),
            ("output gate mean / share < 0.1", "test_cross_entropy", "output-gates"),
        ),
    ),
    "translation-small-gpu": ArmTable(
        "translation-small-gpu",
        "arm (seed 1)",
        MICRO_DEEP_ARMS,
        (
            ("test CE", "test_cross_entropy", "score"),
            ("val CE", "validation_cross_entropy", "score"),
            ("test BLEU", "test_bleu", "score"),
            ("chrF", "test_chrf", "score"),
            ("final gates q / k (mean)", "test_cross_entropy", "gates"),
        ),
    ),
    # README.md
    "readme-studies": Template(
        (
            "| study | twin | none / baseline | global | deep_global | status |",
            "| --- | --- | --- | --- | --- | --- |",
            "| GLUE dev, MiniLM, `cls` pooling, H100 (`docs/RESULTS.md`) | `baseline` | "
            "SST-2 {glue-minilm-h100 baseline sst2_accuracy score}, MRPC {glue-minilm-h100 baseline mrpc_accuracy "
            "score}, "
            "RTE {glue-minilm-h100 baseline rte_accuracy score} | "
            "{glue-minilm-h100 global sst2_accuracy score}, {glue-minilm-h100 global mrpc_accuracy score}, "
            "{glue-minilm-h100 global rte_accuracy score} | "
            "{glue-minilm-h100 deep_global sst2_accuracy score}, {glue-minilm-h100 deep_global mrpc_accuracy score}, "
            "{glue-minilm-h100 deep_global rte_accuracy score} | "
            "done: {runs glue-minilm-h100} runs, 3 seeds, "
            "{beyond glue-minilm-h100 sst2_accuracy mrpc_accuracy rte_accuracy} |",
            "| GLUE dev accuracy, MiniLM, `mean` pooling, CPU (`docs/RESULTS.md`) | `none` (mean) | "
            "RTE {glue-minilm-cpu-mean finetune/none rte_accuracy score}, MRPC {glue-minilm-cpu-mean finetune/none "
            "mrpc_accuracy score}, "
            "SST-2 {glue-minilm-cpu-mean finetune/none sst2_accuracy score} (5 seeds) | "
            "RTE {glue-minilm-cpu-mean finetune/global rte_accuracy score}, MRPC {glue-minilm-cpu-mean "
            "finetune/global mrpc_accuracy score}, "
            "SST-2 {glue-minilm-cpu-mean finetune/global sst2_accuracy score} | "
            "RTE {glue-minilm-cpu-mean finetune/deep_global rte_accuracy score}, MRPC {glue-minilm-cpu-mean "
            "finetune/deep_global mrpc_accuracy score}, "
            "SST-2 {glue-minilm-cpu-mean finetune/deep_global sst2_accuracy score} | "
            "done: {runs glue-minilm-cpu-mean} runs, {beyond glue-minilm-cpu-mean rte_accuracy mrpc_accuracy "
            "sst2_accuracy} "
            "(deep_global {glue-minilm-cpu-mean finetune/deep_global rte_accuracy paired}, "
            "{glue-minilm-cpu-mean finetune/deep_global mrpc_accuracy paired}, {glue-minilm-cpu-mean "
            "finetune/deep_global sst2_accuracy paired}) |",
            "| Translation from scratch, Multi30k En-De test BLEU (beam 5), micro, CPU (`docs/TRANSLATION.md`) | "
            "`none` | "
            "{translation-micro none test_bleu score-n} | {translation-micro global test_bleu score-n} | "
            "{translation-micro deep_global test_bleu score-n} | "
            "5-epoch grid done ({runs translation-micro} runs), {beyond translation-micro test_bleu} "
            "(deep: {translation-micro deep test_bleu score-n}); its 10-epoch grid not run |",
            "| Translation at the paper's settings: micro-deep (6 encoder layers), gates per head starting half open "
            "as "
            "in the authors' code; primary metric test cross-entropy (`docs/TRANSLATION.md`) | `none` | "
            f"test cross-entropy {{{MICRO_DEEP} none test_cross_entropy score-n}} | "
            f"`global`, authors' gate: {{{MICRO_DEEP} global:{AUTHORS} test_cross_entropy paired}} | "
            f"authors' gate (bias 0, per head) {{{MICRO_DEEP} deep_global:{AUTHORS} test_cross_entropy paired}}; "
            f"today's start (bias -4) {{{MICRO_DEEP} deep_global test_cross_entropy paired}} | "
            f"done: {{runs {MICRO_DEEP}}} runs; by the rule written before the runs: {{verdicts {MICRO_DEEP}}} "
            f"(power {{{MICRO_DEEP} deep_global test_cross_entropy power}}-"
            f"{{{MICRO_DEEP} deep_global:{AUTHORS} test_cross_entropy power}} nats) |",
            "| Translation, gates starting half open at micro (2 encoder layers), to tell the start from the depth; "
            "primary metric test cross-entropy (`docs/TRANSLATION.md`) | `none` | "
            "test cross-entropy {translation-micro-start none test_cross_entropy score}, "
            "BLEU {translation-micro-start none test_bleu score} (5 seeds) | - | "
            f"bias 0 (shared gate): {{translation-micro-start {START} test_cross_entropy paired}}; "
            f"BLEU {{translation-micro-start {START} test_bleu paired}} | "
            "done: {runs translation-micro-start} runs; by the rule written before the runs: "
            "{verdicts translation-micro-start} "
            f"(power {{translation-micro-start {START} test_cross_entropy power}} nats) |",
            "| Translation, a gate on each head's output (Qiu et al. 2025) from the token alone, and driven by the "
            "sentence context, at micro-deep; primary metric test cross-entropy (`docs/TRANSLATION.md`) | `none` | "
            f"test cross-entropy {{{OUTPUT_GATE} none test_cross_entropy score-n}}; "
            f"the token-only gate {{{OUTPUT_GATE} {TOKEN_GATE} test_cross_entropy paired}} | "
            "output gate driven by `global`, no query/key mixing: "
            f"{{{OUTPUT_GATE} {CONTEXT_GATE} test_cross_entropy paired}} | - | "
            f"done: {{runs {OUTPUT_GATE}}} runs; by the rule written before the runs: {{verdicts {OUTPUT_GATE}}} "
            f"(power {{{OUTPUT_GATE} {TOKEN_GATE} test_cross_entropy power}}-"
            f"{{{OUTPUT_GATE} {CONTEXT_GATE} test_cross_entropy power}} nats); against the token-only gate, the "
            f"context adds {{{OUTPUT_GATE} {CONTEXT_GATE} test_cross_entropy paired against {TOKEN_GATE}}} |",
            "| Translation at Transformer size: small (6 + 6 layers, d_model 256), 30 epochs, bf16, H200; primary "
            "metric test cross-entropy (`docs/TRANSLATION.md`) | `none` | "
            "{runs translation-small-gpu} of 12 runs in: test cross-entropy "
            "{translation-small-gpu none test_cross_entropy score-n}, BLEU {translation-small-gpu none test_bleu "
            "score} | "
            f"`global`, authors' gate: {{translation-small-gpu global:{AUTHORS} test_cross_entropy score-n}} | "
            f"authors' gate {{translation-small-gpu deep_global:{AUTHORS} test_cross_entropy score}}, today's start "
            "{translation-small-gpu deep_global test_cross_entropy score-n} | "
            f"seed 1 only: every context arm {{translation-small-gpu deep_global:{AUTHORS} test_cross_entropy diff}} "
            "to {translation-small-gpu deep_global test_cross_entropy diff} nats of cross-entropy from the twin; "
            "seeds 2-3 to run |",
        )
    ),
    "readme-today": Template(
        (
            "| task / setting | compared with the twin | paired difference [95% interval] | verdict | details |",
            "| --- | --- | --- | --- | --- |",
            "| translation from scratch, micro (2-layer encoder), 5 epochs | test BLEU: `global`, `deep`, "
            "`deep_global` | {translation-micro global test_bleu paired}, {translation-micro deep test_bleu paired}, "
            "{translation-micro deep_global test_bleu paired} | {beyond translation-micro test_bleu}; the 10-epoch "
            "grid is not run | [TRANSLATION.md](docs/TRANSLATION.md) |",
            "| translation, micro-deep (6-layer encoder) | test cross-entropy (nats): `deep_global` with the authors' "
            "gate (bias 0, per head); from bias -4; `global` with the authors' gate | "
            f"{{{MICRO_DEEP} deep_global:{AUTHORS} test_cross_entropy paired}}; "
            f"{{{MICRO_DEEP} deep_global test_cross_entropy paired}}; "
            f"{{{MICRO_DEEP} global:{AUTHORS} test_cross_entropy paired}} | {{verdicts {MICRO_DEEP}}}; power "
            f"{{{MICRO_DEEP} deep_global test_cross_entropy power}}-"
            f"{{{MICRO_DEEP} deep_global:{AUTHORS} test_cross_entropy power}} nats | "
            f"[TRANSLATION.md](docs/TRANSLATION.md) |",
            "| translation, micro (2 layers), gates starting half open | test cross-entropy: `deep_global`, bias 0, "
            f"one gate | {{translation-micro-start {START} test_cross_entropy paired}} | "
            "{verdicts translation-micro-start}; power "
            f"{{translation-micro-start {START} test_cross_entropy power}} nats | "
            f"[TRANSLATION.md](docs/TRANSLATION.md) |",
            "| translation, micro-deep, a gate on each head's output (Qiu et al. 2025) | test cross-entropy: from the "
            f"token alone; driven by the sentence context | {{{OUTPUT_GATE} {TOKEN_GATE} test_cross_entropy paired}}; "
            f"{{{OUTPUT_GATE} {CONTEXT_GATE} test_cross_entropy paired}} | {{verdicts {OUTPUT_GATE}}}; power "
            f"{{{OUTPUT_GATE} {TOKEN_GATE} test_cross_entropy power}}-"
            f"{{{OUTPUT_GATE} {CONTEXT_GATE} test_cross_entropy power}} nats | [TRANSLATION.md](docs/TRANSLATION.md) "
            f"|",
            "| translation, small (6 + 6 layers), GPU | test cross-entropy, seed 1 of 3 | "
            f"{{translation-small-gpu deep_global:{AUTHORS} test_cross_entropy diff}} to "
            "{translation-small-gpu deep_global test_cross_entropy diff} | no verdict yet | "
            "[TRANSLATION.md](docs/TRANSLATION.md) |",
            "| GLUE dev, MiniLM, `mean` pooling, 5 seeds | accuracy: `deep_global` on RTE, MRPC, SST-2 | "
            "{glue-minilm-cpu-mean finetune/deep_global rte_accuracy paired}, {glue-minilm-cpu-mean "
            "finetune/deep_global mrpc_accuracy paired}, "
            "{glue-minilm-cpu-mean finetune/deep_global sst2_accuracy paired} | "
            "{beyond glue-minilm-cpu-mean rte_accuracy mrpc_accuracy sst2_accuracy} | [RESULTS.md](docs/RESULTS.md) |",
        )
    ),
}
