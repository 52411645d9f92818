"""The results tables of docs/RESULTS.md and the translation pages (docs/TRANSLATION*.md), by the name their
`<!-- render: table NAME -->` block gives (`render`): which study, arms and row labels, which columns (`tables`); a
cell is a figure kind (`quotes.KINDS`). README's tables are templates written in README itself (`render: template`)."""

from .tables import ArmTable, MetricRowsTable, MetricTable, RunsTable


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
LOCAL = "translation-micro-deep-local"
LOCAL_ALONE = 'none:local_bias="query"'
LOCAL_COMBINED = f'deep_global:{AUTHORS},local_bias="query"'


CLM = "clm-tinyshakespeare-cpu"
CLM_ARMS = (("none", "`none` (twin)"), (f"global:{AUTHORS}", "`global`"), (f"deep_global:{AUTHORS}", "`deep_global`"))
# The causal studies' columns: the primary metric and the rule's power, then the secondary metric.
CLM_COLUMNS = (
    ("test CE (nats), mean ± std (seeds)", "test_cross_entropy", "score-n"),
    ("paired test CE [95% interval]", "test_cross_entropy", "paired"),
    ("seeds won", "test_cross_entropy", "won"),
    ("detectable test CE diff (80% power)", "test_cross_entropy", "power"),
    ("val CE, paired", "validation_cross_entropy", "paired"),
)
CLM_CONFIRM = "clm-tinyshakespeare-confirm"
CLM_CONFIRM_ARMS = (
    ("none", "`none` (twin)"),
    (f"global:{AUTHORS}", "`global`"),
    (f"global:context_rank=64,{AUTHORS}", "`global`, rank 64"),
)


def h100_table(kind):
    """The H100 GLUE grid (`cls` pooling, 3 seeds): per task and metric, each variant's figure `kind`."""
    return MetricRowsTable(
        "glue-minilm-h100",
        "task (metric)",
        (
            ("finetune/baseline", "BERT baseline"),
            ("finetune/global", "CASAN global"),
            ("finetune/deep", "CASAN deep"),
            ("finetune/deep_global", "CASAN deep_global"),
        ),
        (
            ("sst2_accuracy", "SST-2 (accuracy)"),
            ("mrpc_accuracy", "MRPC (accuracy)"),
            ("mrpc_f1", "MRPC (F1)"),
            ("rte_accuracy", "RTE (accuracy)"),
        ),
        kind,
    )


PAGES = {
    # docs/RESULTS.md: the CPU GLUE study, one table per task and metric.
    "glue-rte-accuracy": ArmTable(GLUE, "RTE accuracy", GLUE_ARMS, glue_columns("rte_accuracy")),
    "glue-mrpc-accuracy": ArmTable(GLUE, "MRPC accuracy", GLUE_ARMS, glue_columns("mrpc_accuracy")),
    "glue-mrpc-f1": ArmTable(GLUE, "MRPC F1", GLUE_ARMS, glue_columns("mrpc_f1", with_runs=False)),
    "glue-sst2-accuracy": ArmTable(GLUE, "SST-2 accuracy", GLUE_ARMS, glue_columns("sst2_accuracy")),
    "glue-h100-score": h100_table("score"),
    "glue-h100-seeds": h100_table("seeds"),
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
    # docs/CAUSAL.md: the causal study's arms as their runs land (no verdict column: its rule waits for five seeds).
    "clm-tinyshakespeare": ArmTable(
        CLM,
        "arm (authors' gate start)",
        CLM_ARMS,
        CLM_COLUMNS,
    ),
    # docs/CAUSAL.md: the confirmatory study's arms as their runs land (its rule waits for twenty seeds).
    "clm-tinyshakespeare-confirm": ArmTable(
        CLM_CONFIRM,
        "arm (authors' gate start)",
        CLM_CONFIRM_ARMS,
        CLM_COLUMNS,
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
    # docs/TRANSLATION_DEEP.md
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
    # docs/TRANSLATION_BEYOND.md
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
    "translation-micro-deep-local": ArmTable(
        LOCAL,
        "arm",
        (
            ("none", "`none`"),
            (LOCAL_ALONE, "the local bias alone (query window, layers 0-2)"),
            (LOCAL_COMBINED, "the local bias with `deep_global`, the authors' gate"),
        ),
        (
            ("test CE", "test_cross_entropy", "score-n"),
            ("paired to `none` [95% interval]", "test_cross_entropy", "paired"),
            ("seeds better", "test_cross_entropy", "won"),
            ("power (80%)", "test_cross_entropy", "power"),
            ("verdict", "test_cross_entropy", "verdict"),
            ("val CE paired", "validation_cross_entropy", "diff"),
            ("test BLEU paired", "test_bleu", "paired"),
        ),
    ),
    # docs/TRANSLATION_DEEP.md, "At Transformer size"
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
}
