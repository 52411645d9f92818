"""Every result figure that README.md, docs/RESULTS.md, docs/TRANSLATION*.md and docs/CAUSAL.md state outside their
rendered blocks and quotes, by a phrase that holds it, listed with where it comes from. A result figure is what
`test_prose_numbers.result_figures` finds (docs/TESTS.md, "Figures in the docs": a number with a decimal part, a
percentage, a ratio, a mean ± std, a count of runs, a timing); other numbers (versions, sizes, seeds, layers, steps,
commits) need no entry, and a phrase that holds no result figure is refused.

The reasons: `test: NAME`, a test of tests/test_prose_numbers.py computes it from the code or the records;
`record: WHERE`, a committed record holds it (a doc named there holds each figure of its phrases, as written);
`no record: WHY`, a result that has no committed record (a one-off run by hand, an estimate), which the doc says
beside it; `no result: WHY`, the shape of a result but none (a setting with a decimal part).
`test_every_result_figure_outside_the_rendered_blocks_is_listed_with_its_test_or_record` fails on a result figure
no phrase holds and on a phrase the doc no longer holds: a changed figure is listed again, with where it comes
from."""

LOOSE = {
    "README.md": {
        "no record: a one-off run by hand, said so beside it": (
            "about 21 minutes",
            "78.68% accuracy / 85.67 F1",
            "about 2 points",
        ),
        "test: test_the_parameters_the_context_adds": ("costs +8% (`global`) to +27% (`deep_global`)",),
        "test: test_the_causal_study_s_llama": ("scratch at 1.6M parameters",),
        "no result: what a speed of 1.00 against BERT means": ("1.00 is free", "distance from 1.00"),
    },
    "docs/RESULTS.md": {
        "record: the studies' results files (docs/results/), one record a run": (
            "(32 GLUE runs here, 16 translation runs",
            "(36 runs)",
            "since 12 runs shared",
            "the 24 small-task runs",
            "ran 36 fine-tuning runs",
        ),
        "no result: the quantiles of the power's formula": ("(t(0.975, n-1) + t(0.80, n-1))",),
        "test: test_the_power_factors_at_five_seeds": ("differences, 1.66 x sd",),
        "test: test_the_glue_dev_sets_and_what_one_example_weighs": (
            "0.36 points;",
            "0.25 points;",
            "0.11 points)",
        ),
        "test: test_the_gates_start_at_sigmoid_minus_four": (
            "(sigmoid(-4) = 0.018)",
            "(sigmoid(-4) = 1.8 %)",
        ),
        "record: docs/BENCHMARKS_HISTORY.md, its tables of inference speed": (
            "0.91x BERT's",
            "0.92x for `deep_global`",
        ),
        "no record: a one-off run by hand, said so beside it": (
            "about 10 minutes of device time",
            "| 78.27 ± 0.28 | … | 78.31 ± 0.17 (2 seeds) |",
            "| 85.38 ± 0.14 | … | 85.34 ± 0.01 (2 seeds) |",
            "| 78.43, 77.94, 78.43 | … | 78.19, 78.43, not run |",
            "within 0.1 point",
            "lands at 78.31 / 85.34, 0.5 point under",
            "(1.4 points)",
            "78.68 accuracy / 85.67 F1, against 78.68 / 85.71",
            "(about 20 minutes per run",
            "| `cls` | 76.15 / 77.29 / 77.98 | 77.14 ± 0.93 | 0.59 |",
            "| `mean` | 79.59 / 78.90 / 79.01 | 79.17 ± 0.37 | 0.50 |",
            "| `structured` | 77.75 / 78.10 / 80.62 | 78.82 ± 1.57 | 3.87 |",
            "| `generalized` | 79.13 / 79.59 / 80.16 | 79.63 ± 0.52 | 0.49 |",
            "it gave 77.75 again",
            "+2.98 / +2.30 / +2.18 (mean +2.49)",
            "+3.44 / +1.61 / +1.03 (mean +2.03)",
            "-0.46 / +0.69 / +1.15 (mean +0.46)",
            "+1.38 / +1.49 / -0.46 (mean +0.80)",
            "1.7 points ahead",
            "about 1 to 1.6 points",
            "by 2.2 to 3.0 points",
            "(by 1.0 to 3.4)",
            "gains 0.46 points",
            "stays near 3.9",
            "in about 10 minutes",
            "about 21 minutes",
        ),
        "no result: a setting": (
            "penalty 1.0)",
            "With penalty 1.0",
            "SST-2 on 30 % of its training set",
            "parameters at 10x the learning rate",
        ),
        "test: test_the_parameters_the_context_adds": (
            "22.71 M BERT, 24.49 M (+1.78 M) `global`, 27.15 M (+4.43 M) `deep`, 28.92 M (+6.20 M)",
            "+8% (global) to +27% (deep_global)",
            "+6.9% / +8.1% parameters instead of +71% / +84%",
            "| 28.92M | 24.05M | 27.15M | 23.70M |",
            "(+1.34M instead of +6.20M",
        ),
        "no result: the dev set's majority class, a property of the data": (
            "class is 52.7 %",
            "class is 68.4 %",
        ),
        "no record: an estimate of runs still to do": (
            "210 fine-tuning runs and 105 masked-LM runs",
            "over 80 hours",
        ),
    },
    "docs/TRANSLATION.md": {
        "no record: a published figure, cited with its source": (
            "against 41.0 for",
            "**BLEU 41.02 on",
        ),
        "no result: a setting": (
            "dropout 0.1",
            "dropout 0.3",
            "label smoothing 0.1",
            "gates near 0.5",
        ),
        "no record: the time of the project's tests, said as measured": (
            "about 30 s",
            "16 s on this machine when quiet, 75 s under load",
        ),
        "test: test_the_gates_start_at_sigmoid_minus_four": (
            "(sigmoid(-4) = 0.018)",
            "start at 0.018)",
        ),
        "no record: the model's size as run_translation.py logs it; docs/MODELS.md counts every preset": (
            "1.95M parameters",
            "1.95M-parameter model",
        ),
        "no record: an estimate of runs still to do": ("about 2.5 hours",),
    },
    "docs/TRANSLATION_DEEP.md": {
        "record: the study's results file (docs/results/), one record a run": (
            "Seeds 1-5: 20 runs",
            "(10 runs,",
            "(… of 12 runs)",
        ),
        "no result: a setting": (
            "dropout 0.1",
            "dropout 0.3",
            "label smoothing 0.1",
            "starting near 0.5",
            "starting at 0.5",
            "weight decay 0.0001",
            "a 540 s budget",
        ),
        "no result: the quantiles of the power's formula": ("(t(0.975, n-1) + t(0.80, n-1))",),
        "test: test_the_gates_start_at_sigmoid_minus_four": ("(sigmoid(-4) = 0.018)",),
        "no record: an estimate of runs still to do": ("(8 runs, about 18 minutes",),
        "test: test_the_power_factors_at_five_seeds": (
            "differences: 1.66 x",
            "half-width, 1.24 x",
        ),
        "no record: a one-off run by hand, said so beside it": (
            "loss 4.4862 against the record's 4.4847 and test BLEU 30.72 against 31.12",
            "weights 1.2e-5 apart",
            "4.4862 with 1 thread and 4.4881 with 2",
            "the record's 4.4847",
        ),
    },
    "docs/TRANSLATION_BEYOND.md": {
        "record: the study's results file (docs/results/), one record a run": (
            "training loss 4.503355071618168, validation and",
            "2.536040256552759 and 2.4421525261696204, test BLEU 30.4378, chrF 55.6252",
            "15 runs, seed by seed",
            "15 runs.",
            "(5 runs",
            "5 runs)",
            "… of 15 runs, five seeds",
        ),
        "no result: a setting": ("values under 0.1",),
        "no result: the Gaussian bias's factor a whole window from its centre": ("exp(-2) = 0.14",),
        "no record: a one-off run by hand, said so beside it": (
            "layer 0 0.49-0.61, layer 1 0.57-0.79, layer 2 0.60-0.88",
            "7.7-12.7 tokens",
            "layer 0 0.48-0.52, layer 1 0.24-0.83, layer",
            "2 0.45-0.99",
            "(a new model's are 0.49-0.51 of it)",
        ),
    },
    "docs/CAUSAL.md": {
        "no record: a timing of the test file by hand, said so beside it": ("about 50 s on the shared",),
        "no result: the study's settings, the shares of its split, its weight decay and its gates' start": (
            "into 90% training, 5% validation and 5% test",
            "weight decay 0.1",
            "starting near 0.5",
        ),
        "test: test_the_causal_study_s_llama": ("1.57M parameters without context", "a 1.6M-parameter Llama"),
        "record: the study's results file (docs/results/), one record a run, all in": ("All 15 runs are in",),
        "no record: the steps timed by hand before the runs to size the study, said so beside it": (
            "(load about 8.6 on 2 cores), a step of `none` took 1.54 s, `global` 1.59 s and `deep_global` 1.98 s",
            "about 1,500 x (1.54 + 1.59 + 1.98) x 5 / 2 s, 5.3 hours",
        ),
        "record: the study's results file (docs/results/), one record a run": ("values. 15 runs, seed by seed",),
        "no result: the quantiles of the power's formula": ("(t(0.975, 4) + t(0.80, 4))",),
        "test: test_the_power_factors_at_five_seeds": ("differences, 1.66 x sd",),
    },
}


# Every verdict in words about an arm (`test_prose_numbers.VERDICT_WORD`: pays, worse, level, better, costs, "buys
# nothing", "adds nothing", "no effect" and the like) that README.md, docs/RESULTS.md, docs/TRANSLATION*.md and
# docs/CAUSAL.md state outside their rendered blocks and quotes, by a phrase that holds it, listed with what it says:
# `verdict: STUDY ARM METRIC is WORD[; ...]`, its study's rule's verdict of that arm (`quote: ... verdict`,
# `against ARM` allowed), computed from the records; `verdicts: STUDY[, STUDY] none pays`, no arm of those studies pays
# by the rule; `no verdict: WHY`, the word said of no arm's result (the rule's definition, a question, a plan, a speed
# whose figures are rendered). A reversed verdict no longer holds its listed phrase, and a changed record no longer
# gives the listed verdict: either fails `test_every_verdict_in_words_is_listed_and_is_its_records`.
LOCAL = 'translation-micro-deep-local none:local_bias="query" test_cross_entropy'
LOCAL_COMBINED = (
    'translation-micro-deep-local deep_global:gate_bias_init=0.0,gate_per_head=true,local_bias="query" '
    "test_cross_entropy"
)
RULE = "no verdict: the decision rule written before the runs, or the plan it sets"
QUESTION = "no verdict: a question the section asks"
COSTS = "no verdict: what the context costs in time, whose figures are rendered from the benchmark's records"
VERDICTS = {
    "README.md": {
        COSTS: (
            "What each kind costs at BERT-base",
            "The costs are rendered from the benchmark's records",
            "at a cost near `global`'s; `global` costs least",
            "CASAN costs +8%",
            "its equations and costs",
            "how the costs came down",
            "What the causal context costs beside the source model",
        ),
        "verdicts: translation-micro-deep, translation-micro-start, translation-micro-deep-output-gate, "
        "translation-micro-deep-local none pays": ("None of them has paid at the sizes studied here",),
        QUESTION: ("Results: does the context pay?",),
        RULE: (
            "an arm *pays* if its paired difference",
            "it is *worse* if that interval lies entirely above zero; otherwise *level*",
        ),
        "no verdict: advice, the run that tells on one's own data": ("with your pooling) pays for that",),
        "verdicts: translation-micro-deep-local none pays": ('"The local bias") does not pay where it was measured',),
        f"verdict: {LOCAL} is worse": (
            "the local bias alone is worse than the twin in test cross-entropy",
            "and the cost is about the smallest the study could detect",
        ),
        f"verdict: {LOCAL_COMBINED} is level": ("with `deep_global` and the authors' gate it is level",),
        "verdicts: clm-tinyshakespeare-cpu none pays": (
            "Whether it pays: trained from scratch at 1.6M parameters, five seeds, neither `global` nor `deep_global` "
            "pays beyond the spread",
        ),
    },
    "docs/RESULTS.md": {
        QUESTION: ("Does the context pay? Five seeds", "Whether the context pays once it is taught"),
        "no verdict: the significance level of the power's formula": ("at the 5% level",),
        COSTS: ("What the context costs is measured side by side",),
        "no verdict: a heading; its table renders the verdicts": ("what it costs in quality",),
    },
    "docs/TRANSLATION.md": {
        QUESTION: (
            "the study of whether the context pays on this task",
            "Which start is the better default from scratch",
            "Does the context pay? The study on the CPU",
        ),
        COSTS: ("its cost is measured by the benchmark",),
    },
    "docs/TRANSLATION_DEEP.md": {
        "verdicts: translation-micro-deep none pays": ("if bias 0 pays at micro, where it does not at micro-deep",),
        RULE: (
            "if it does not pay at micro either, the start alone does not make the context pay",
            "an arm's context *pays on this task* if",
            "The conclusion says which arms pay",
            "if none pays, it says so",
            "if the authors' start pays and today's does not",
        ),
        "no verdict: the metric's direction": ("(nats; lower is better)",),
        "no verdict: the significance level of the power's formula": ("at the 5% level",),
        "verdict: translation-micro-deep deep_global:gate_bias_init=0.0,gate_per_head=true test_cross_entropy "
        "is level": ("in its keys and it buys nothing measurable",),
        "verdict: translation-micro-start deep_global:gate_bias_init=0.0 test_cross_entropy is level": (
            "neither start is better than the other beyond the spread",
        ),
        "verdicts: translation-micro-deep, translation-micro-start none pays": (
            "on this task the context costs time and buys nothing measurable, from either start",
        ),
        "verdicts: translation-micro-start none pays": ("the start alone does not make the context pay**",),
    },
    "docs/TRANSLATION_BEYOND.md": {
        QUESTION: (
            "This study asks whether either pays where",
            "This study asks whether it pays here",
            "this study cannot say whether the bias pays there",
        ),
        "verdicts: translation-micro-deep none pays": ("(the paper's design) and none paid",),
        RULE: (
            "an arm *pays* if its paired difference",
            "it is *worse* if the interval is entirely above zero; otherwise it is *level*",
            'a level arm is reported as "no difference larger than the power", not as "no effect"',
            'not as "no effect"',
            "if the local bias pays and the combination does not add to it",
            "if neither pays, it says so",
        ),
        "verdict: translation-micro-deep-output-gate "
        'global:context_targets=[],output_gate="elementwise",output_gate_context=true test_cross_entropy is level; '
        "translation-micro-deep-output-gate "
        'global:context_targets=[],output_gate="elementwise",output_gate_context=true test_cross_entropy against '
        'none:output_gate="elementwise" is level': (
            "the sentence context adds nothing the runs could detect.**",
            "the context adds nothing the runs could detect. -",
        ),
        "no verdict: the papers' motivation for the study": ("what tends to pay where data and models are small",),
        f"verdict: {LOCAL} is worse": (
            "**The local bias alone is worse than the twin:**",
            "The cost is about the smallest the study could detect",
            "alone it costs a little",
        ),
        'verdict: translation-micro-deep-local none:local_bias="query" test_bleu is level': (
            "and test BLEU is level",
        ),
        f"verdict: {LOCAL_COMBINED} is level": (
            "the authors' gate) is level with the twin:**",
            "what it leaves room for is a cost",
        ),
        f'verdict: {LOCAL_COMBINED} against none:local_bias="query" is level': (
            "**The combination is level with the local bias alone:**",
        ),
        "no verdict: the length bins, each within its interval; the second table renders them": (
            "the local bias is level with the twin on the longer sentences",
        ),
        "verdicts: translation-micro-deep-local none pays": (
            "the local bias as the paper starts it does not pay, alone or with the deep-global context",
        ),
    },
    "docs/CAUSAL.md": {
        QUESTION: ("does the context pay in a small causal LM?",),
        "no verdict: the metric's direction": ("(nats; lower is better)",),
        RULE: (
            "an arm *pays* if its paired difference",
            "it is *worse* if the interval is entirely above zero; otherwise it is *level*",
            'not as "no effect"',
            "if an arm pays, README's",
            "the cheaper one if both pay and `deep_global` adds nothing over `global`); if none pays",
        ),
        "no verdict: the significance level of the power's formula": ("at the 5% level",),
        "verdicts: clm-tinyshakespeare-cpu none pays": (
            "neither context pays beyond the spread, and neither is worse",
        ),
    },
}
