"""The causal language-model study (docs/CAUSAL.md): its data, a text cut in order at blank lines into training,
validation and test parts (`split_at_blank_lines`) with a byte-level BPE tokenizer trained on the training part
alone (`train_byte_level_tokenizer`), written once into a folder the runs read (`prepare_data`); its records
(`collect`) and paired tables (`tables`), with the rule's verdict (`rule_verdict`). `scripts/clm_sweep.py` runs
the grid with `scripts/run_clm.py`."""

import json
from pathlib import Path

from ..cli.resume import last_complete_checkpoint
from ..cli.run_start import RUN_START_NAME
from .arms import CONTEXT_OPTIONS, arm_order, check_cells, study_variants
from .grid import run_time
from .paired import Comparison, paired_interval, paired_table
from .translation import between_arms, differing_data, relative_to_twin, runs_by_commit


TWIN = "none"
# The sizes of the study's Llama (`run_clm.py`'s size flags): micro, a width of 128 and 4 layers of 4 heads, fits the
# study's 15 runs in about eight hours of a 2-core CPU, two runs side by side (docs/CAUSAL.md).
MODEL_SIZES = {
    "micro": dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=512),
}
SPLITS = ("train", "validation", "test")
# The token that ends a text, and starts and pads none: the tokenizer adds no special token to the text it encodes.
END_OF_TEXT = "<|endoftext|>"
TOKENIZER_FOLDER = "tokenizer"
SAMPLE_NAME = "sample.json"  # run_clm.py's greedy sample


def split_at_blank_lines(text, shares):
    """`text` cut in order into len(`shares`) parts at blank lines (between blocks), each part the blocks up to its
    share of the characters (cumulatively, e.g. (0.9, 0.05, 0.05)): `[part, ...]`, each its blocks joined by the
    blank lines between them and ending in a line break. A ValueError where a part would hold no block."""
    if abs(sum(shares) - 1) > 1e-9 or any(share <= 0 for share in shares):
        raise ValueError(f"The shares must be positive and sum to 1; got {shares}.")
    blocks = [block.strip("\n") for block in text.split("\n\n")]
    blocks = [block for block in blocks if block]
    total = sum(len(block) for block in blocks)
    parts, start, reached, bound = [], 0, 0, 0.0
    for share in shares[:-1]:
        bound += share * total
        end = start
        while end < len(blocks) and reached + len(blocks[end]) <= bound:
            reached += len(blocks[end])
            end += 1
        parts.append(blocks[start:end])
        start = end
    parts.append(blocks[start:])
    if any(not part for part in parts):
        raise ValueError(f"The text's {len(blocks)} blocks make an empty part at shares {shares}.")
    return ["\n\n".join(part) + "\n" for part in parts]


def train_byte_level_tokenizer(texts, vocab_size, model_max_length):
    """A byte-level BPE tokenizer (GPT-2's kind: every byte a symbol, so no text is unknown) of `vocab_size` pieces
    trained on `texts`, as a `PreTrainedTokenizerFast` whose `END_OF_TEXT` is its end, start and unknown token and
    which adds none of them to what it encodes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from ..translation.tokenizer import PortableTokenizer

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return PortableTokenizer(
        tokenizer_object=tokenizer,
        bos_token=END_OF_TEXT,
        eos_token=END_OF_TEXT,
        unk_token=END_OF_TEXT,
        model_max_length=model_max_length,
        model_input_names=["input_ids", "attention_mask"],
    )


def data_paths(folder):
    """`{split: path}` of the parts in `folder`, with the tokenizer's folder under "tokenizer"."""
    folder = Path(folder)
    return {**{split: str(folder / f"{split}.txt") for split in SPLITS}, "tokenizer": str(folder / TOKENIZER_FOLDER)}


def prepare_data(text_file, folder, shares, vocab_size, model_max_length):
    """Writes into `folder` the parts of `text_file` (`<split>.txt`, `split_at_blank_lines`) and the tokenizer
    trained on the training part (`TOKENIZER_FOLDER`), unless they are there already as this would write them, and
    returns their `data_paths`. A folder holding other parts or another tokenizer is refused: nothing a run read is
    overwritten."""
    paths = data_paths(folder)
    parts = dict(zip(SPLITS, split_at_blank_lines(Path(text_file).read_text(encoding="utf-8"), shares), strict=True))
    tokenizer = train_byte_level_tokenizer([parts["train"]], vocab_size, model_max_length)
    if Path(folder).exists():
        for split, part in parts.items():
            if not Path(paths[split]).is_file() or Path(paths[split]).read_text(encoding="utf-8") != part:
                raise ValueError(f"{paths[split]} is not the {split} part this study cuts: give another folder.")
        saved = Path(paths["tokenizer"]) / "tokenizer.json"
        if not saved.is_file() or json.loads(saved.read_text()) != json.loads(tokenizer.backend_tokenizer.to_str()):
            raise ValueError(f"{paths['tokenizer']} is not the tokenizer this study trains: give another folder.")
        return paths
    Path(folder).mkdir(parents=True)
    for split, part in parts.items():
        Path(paths[split]).write_text(part, encoding="utf-8")
    tokenizer.save_pretrained(paths["tokenizer"])
    return paths


def read(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def collect(run):
    """A finished run's record: validation and test cross-entropy per token, the greedy sample, the training loss,
    time and steps over the whole run (`grid.run_time`), the context options its model had, the hash of the data
    and tokenizer it read, and what it received as it started (`run_start.json`: command line, commit,
    versions)."""
    train = read(run.folder / "train_results.json")
    steps = read(run.folder / "trainer_state.json")["global_step"]
    validation, test = read(run.folder / "eval_results.json"), read(run.folder / "predict_results.json")
    started = read(run.folder / RUN_START_NAME)
    return {
        "validation_cross_entropy": validation["eval_cross_entropy"],
        "test_cross_entropy": test["predict_cross_entropy"],
        "test_blocks": test["predict_samples"],
        "sample": read(run.folder / SAMPLE_NAME),
        "train_loss": train["train_loss"],
        **run_time(started, steps, train["train_runtime"]),
        "context_options": {name: started["settings"].get(name) for name in CONTEXT_OPTIONS},
        "data": started["data"],
        "received": started,
    }


# The budget run's stop (docs/CAUSAL.md, the confirmatory study): this many evaluations in a row above its lowest.
EVALUATIONS_PAST_THE_LOWEST = 4


def budget_from_curve(run_folder):
    """A study's budget from the twin's run in `run_folder`, trained with evaluations along the way: `{"curve":
    [{"step", "validation_cross_entropy"}, ...], "lowest": the point of the lowest, "max_steps": the run's schedule,
    "steps": how far it ran, "received": what the run received as it started (command line, commit)}`. The validation
    loss is the model's cross-entropy per token, as the records' `validation_cross_entropy`. A run stopped before
    its end is read from its last complete checkpoint, and counts once `EVALUATIONS_PAST_THE_LOWEST` evaluations in a
    row lie above its lowest. A ValueError where the run logged no evaluation or stopped too soon."""
    run_folder = Path(run_folder)
    finished = run_folder / "trainer_state.json"
    if finished.is_file():
        state = read(finished)
    else:
        checkpoint = last_complete_checkpoint(run_folder)[0] if run_folder.is_dir() else None
        if checkpoint is None:
            raise ValueError(f"{run_folder} holds neither a finished run nor a complete checkpoint.")
        state = read(Path(checkpoint) / "trainer_state.json")
    curve = [
        {"step": entry["step"], "validation_cross_entropy": entry["eval_loss"]}
        for entry in state["log_history"]
        if "eval_loss" in entry
    ]
    if not curve:
        raise ValueError(f"{run_folder} logged no evaluation during training: run it with --eval_strategy steps.")
    lowest = min(curve, key=lambda point: point["validation_cross_entropy"])
    past_the_lowest = len(curve) - 1 - curve.index(lowest)
    if state["global_step"] < state["max_steps"] and past_the_lowest < EVALUATIONS_PAST_THE_LOWEST:
        raise ValueError(
            f"{run_folder} stopped at step {state['global_step']} of {state['max_steps']} with {past_the_lowest} "
            f"evaluations past its lowest, not {EVALUATIONS_PAST_THE_LOWEST}: let it run on."
        )
    received = read(run_folder / RUN_START_NAME)
    return {
        "curve": curve,
        "lowest": lowest,
        "max_steps": state["max_steps"],
        "steps": state["global_step"],
        "received": received,
    }


CROSS_ENTROPY = "cross-entropy per token (nats; lower is better)"
# (title, record field): the paired tables, the primary metric first (docs/CAUSAL.md's rule).
SCORES = ((f"test {CROSS_ENTROPY}", "test_cross_entropy"), (f"validation {CROSS_ENTROPY}", "validation_cross_entropy"))
RULE_METRICS = tuple(field for _, field in SCORES)


def budgets(records):
    """Each (size, steps) of the records with its records: every table compares runs of one budget."""
    found = sorted({(record["model_size"], record["max_steps"]) for record in records})
    return [
        (size, steps, [r for r in records if (r["model_size"], r["max_steps"]) == (size, steps)])
        for size, steps in found
    ]


def budget_comparisons(size, steps, of_budget):
    """Per score, the `Comparison` of each arm of one budget with `none` of the same seed."""
    check_cells(of_budget, ("model_size", "max_steps", "variant"))
    variants = sorted({record["variant"] for record in of_budget}, key=arm_order(study_variants((TWIN,))))

    def selected(variant):
        return [record for record in of_budget if record["variant"] == variant]

    rows = [
        ([size, str(steps), variant], selected(variant), None if variant == TWIN else selected(TWIN))
        for variant in variants
    ]
    return [
        Comparison(f"{size}, {steps} steps: {title}", ("size", "steps", "variant"), rows, lambda r, f=field: r.get(f),
                   lower_is_better=True, digits=3, metric=field)
        for title, field in SCORES
    ]  # fmt: skip


def rule_verdict(scored, labels):
    """The study's decision rule, written before its runs (docs/CAUSAL.md), for the arm of the rows labelled
    `labels` (size, steps, variant) against the twin: it *pays* if its paired difference in test cross-entropy has a
    95% t interval entirely below zero and its validation cross-entropy is lower on the mean; it is *worse* if that
    interval lies entirely above zero; otherwise it is *level*."""
    pairs = {
        comparison.metric: comparison.paired(runs, twin_runs)
        for comparison in scored
        for row_labels, runs, twin_runs in comparison.rows
        if row_labels == list(labels) and twin_runs is not None
    }
    if len(pairs) < len(RULE_METRICS) or len(pairs[RULE_METRICS[0]].differences) < 2:
        raise ValueError(
            f"The rule needs two seeds of {'/'.join(labels)} and of its twin in {', '.join(RULE_METRICS)}."
        )
    mean, _, half = paired_interval(pairs[RULE_METRICS[0]].differences)
    if mean + half < 0 and pairs[RULE_METRICS[1]].mean < 0:
        return "pays"
    return "worse" if mean - half > 0 else "level"


def comparisons(records):
    """The drawn comparisons: each budget's cross-entropies."""
    return [comparison for budget in budgets(records) for comparison in budget_comparisons(*budget)]


def samples(of_budget):
    """Each arm's greedy sample of its first seed, from the same prompt."""
    lines = []
    for variant in sorted({r["variant"] for r in of_budget}, key=arm_order(study_variants((TWIN,)))):
        record = min((r for r in of_budget if r["variant"] == variant), key=lambda r: r["seed"])
        text = record["sample"]["prompt"] + record["sample"]["continuation"]
        lines.append(f"`{variant}`, seed {record['seed']}:\n\n```text\n{text}\n```\n")
    return "\n".join(lines)


def tables(records):
    """The paired tables of every budget, with each arm's verdict by the rule, the primary metric relative to the
    twin and between the arms, the greedy samples, and the runs per commit."""
    text = f"Twin: `{TWIN}`. Cross-entropy in nats per token. Beyond the spread: the 95% interval excludes 0.\n"
    for size, steps, of_budget in budgets(records):
        scored = budget_comparisons(size, steps, of_budget)
        text += "".join(paired_table(comparison) for comparison in scored)
        verdicts = []
        for labels, runs, twin_runs in scored[0].rows:
            if twin_runs is not None and len(scored[0].differences(runs, twin_runs)) > 1:
                verdicts.append(f"- `{labels[-1]}`: {rule_verdict(scored, labels)}")
        if verdicts:
            text += "\n### By the rule (docs/CAUSAL.md)\n\n" + "\n".join(verdicts) + "\n"
        text += relative_to_twin(scored[0]) + between_arms(scored[0])
        text += f"\n### Greedy samples ({size}, {steps} steps)\n\n" + samples(of_budget)
        text += "\n### Runs per commit (wall time of a run, seconds per training step)\n\n" + runs_by_commit(of_budget)
        text += differing_data(of_budget)
    return text
