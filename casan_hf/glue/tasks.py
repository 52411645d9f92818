"""The nine GLUE tasks: their text columns, label sets and the layout of the original GLUE TSV files.

Every data source (the Hub's `nyu-mll/glue`, a folder of original TSVs, the user's csv/json files) is
brought to the Hub's schema described here, so that everything after loading runs one code path.
"""

import os
from dataclasses import dataclass, field


GLUE_HUB_ID = "nyu-mll/glue"


@dataclass(frozen=True)
class TsvLayout:
    """Where one task's columns sit in its original GLUE TSV files.

    `columns` maps the Hub's column names (text columns and `label`) to the file's header names, or to
    0-based positions when the file has no header (CoLA).
    """

    folder: str
    columns: dict
    has_header: bool = True
    eval_files: dict = field(default_factory=lambda: {"validation": "dev.tsv"})
    header_names: tuple | None = None  # column names to give a file without a header


@dataclass(frozen=True)
class GlueTask:
    name: str
    text_columns: tuple
    label_names: tuple | None  # None: regression (STS-B)
    tsv: TsvLayout
    description: str

    @property
    def is_regression(self):
        return self.label_names is None

    @property
    def eval_splits(self):
        return tuple(self.tsv.eval_files)

    @property
    def tsv_names(self):
        """The original GLUE files of the task: train.tsv and its dev file(s)."""
        return ["train.tsv", *(self.tsv.eval_files.get(split, "train.tsv") for split in self.eval_splits)]


def glue_files(glue_dir, task_name):
    """The original GLUE files a run of `task_name` reads from the folder `glue_dir`."""
    task = get_task(task_name)
    return [os.path.join(glue_dir, task.tsv.folder, name) for name in task.tsv_names]


_NLI = ("entailment", "not_entailment")

GLUE_TASKS = {
    "cola": GlueTask(
        "cola",
        ("sentence",),
        ("unacceptable", "acceptable"),
        TsvLayout(
            "CoLA",
            {"sentence": "sentence", "label": "label"},
            has_header=False,
            header_names=("source", "label", "original_label", "sentence"),
        ),
        "CoLA (linguistic acceptability)",
    ),
    "sst2": GlueTask(
        "sst2",
        ("sentence",),
        ("negative", "positive"),
        TsvLayout("SST-2", {"sentence": "sentence", "label": "label"}),
        "SST-2 (sentiment)",
    ),
    "mrpc": GlueTask(
        "mrpc",
        ("sentence1", "sentence2"),
        ("not_equivalent", "equivalent"),
        TsvLayout("MRPC", {"sentence1": "#1 String", "sentence2": "#2 String", "label": "Quality"}),
        "MRPC (paraphrase)",
    ),
    "qqp": GlueTask(
        "qqp",
        ("question1", "question2"),
        ("not_duplicate", "duplicate"),
        TsvLayout("QQP", {"question1": "question1", "question2": "question2", "label": "is_duplicate"}),
        "QQP (duplicate questions)",
    ),
    "stsb": GlueTask(
        "stsb",
        ("sentence1", "sentence2"),
        None,
        TsvLayout("STS-B", {"sentence1": "sentence1", "sentence2": "sentence2", "label": "score"}),
        "STS-B (semantic similarity, regression on 0-5)",
    ),
    "mnli": GlueTask(
        "mnli",
        ("premise", "hypothesis"),
        ("entailment", "neutral", "contradiction"),
        TsvLayout(
            "MNLI",
            {"premise": "sentence1", "hypothesis": "sentence2", "label": "gold_label"},
            eval_files={"validation_matched": "dev_matched.tsv", "validation_mismatched": "dev_mismatched.tsv"},
        ),
        "MNLI (natural language inference)",
    ),
    "qnli": GlueTask(
        "qnli",
        ("question", "sentence"),
        _NLI,
        TsvLayout("QNLI", {"question": "question", "sentence": "sentence", "label": "label"}),
        "QNLI (question answering inference)",
    ),
    "rte": GlueTask(
        "rte",
        ("sentence1", "sentence2"),
        _NLI,
        TsvLayout("RTE", {"sentence1": "sentence1", "sentence2": "sentence2", "label": "label"}),
        "RTE (textual entailment)",
    ),
    "wnli": GlueTask(
        "wnli",
        ("sentence1", "sentence2"),
        ("not_entailment", "entailment"),
        TsvLayout("WNLI", {"sentence1": "sentence1", "sentence2": "sentence2", "label": "label"}),
        "WNLI (Winograd inference)",
    ),
}

# STS-B similarity scores live on this closed interval.
STSB_RANGE = (0.0, 5.0)


def get_task(name):
    """The task called `name`, or a ValueError listing the nine GLUE tasks."""
    if name not in GLUE_TASKS:
        raise ValueError(f"Unknown GLUE task {name!r}; choose one of {', '.join(GLUE_TASKS)}.")
    return GLUE_TASKS[name]


__all__ = ["GLUE_HUB_ID", "GLUE_TASKS", "STSB_RANGE", "GlueTask", "TsvLayout", "get_task", "glue_files"]
