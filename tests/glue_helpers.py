"""Helpers of the GLUE tests: a tiny random BERT with the real MiniLM tokenizer, synthetic GLUE TSVs in each
task's original format, and running scripts/run_glue.py (in a subprocess or in this process)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import transformers
from tokenizers import ByteLevelBPETokenizer
from transformers import AutoTokenizer, BertConfig, BertModel, RobertaTokenizer

from casan_hf import get_family


REPO_ROOT = Path(__file__).resolve().parents[1]
RUN_GLUE = REPO_ROOT / "scripts" / "run_glue.py"
CONVERT = REPO_ROOT / "scripts" / "convert_bert_to_casan.py"

# Few steps on few short examples: enough to exercise every path, cheap on two shared cores.
TINY_RUN = [
    "--max_seq_length", "32", "--max_train_samples", "16", "--max_eval_samples", "16",
    "--per_device_train_batch_size", "8", "--per_device_eval_batch_size", "16",
    "--report_to", "none", "--logging_steps", "1",
]  # fmt: skip


def tiny_run_args(model, task, glue_dir, output_dir, *flags):
    """scripts/run_glue.py's arguments for a `TINY_RUN` of `model` on the GLUE `task`, with further `flags`."""
    return [
        "--model_name_or_path", model, "--task_name", task, "--glue_dir", glue_dir, *flags,
        "--output_dir", output_dir, *TINY_RUN,
    ]  # fmt: skip


def make_tiny_bert(folder, tokenizer_path):
    """A 2-layer random BERT (hidden 32) saved with the real MiniLM tokenizer: real tokenisation, tiny compute."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=37, max_position_embeddings=64,
    )  # fmt: skip
    BertModel(config).save_pretrained(folder)  # a pretrained encoder, no task head: as BERT checkpoints come
    tokenizer.save_pretrained(folder)
    return str(folder)


def wordpiece_tokenizer(folder, tokenizer_path, glue_dir):
    """MiniLM's real WordPiece tokenizer."""
    return AutoTokenizer.from_pretrained(tokenizer_path)


def wordpiece_tokenizer_without_token_types(folder, tokenizer_path, glue_dir):
    """MiniLM's WordPiece tokenizer returning no token type ids, for a model that takes none (ModernBERT)."""
    return AutoTokenizer.from_pretrained(tokenizer_path, model_input_names=["input_ids", "attention_mask"])


def byte_level_bpe_tokenizer(folder, tokenizer_path, glue_dir):
    """A byte-level BPE trained on MRPC's training sentences, RoBERTa's kind: it returns no token type ids."""
    lines = (Path(glue_dir) / "MRPC" / "train.tsv").read_text(encoding="utf-8").splitlines()
    bpe = ByteLevelBPETokenizer()
    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    bpe.train_from_iterator(lines[1:], vocab_size=1000, show_progress=False, special_tokens=special)
    bpe.save_model(str(folder))
    return RobertaTokenizer(vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"))


# The tokenizer of a tiny source checkpoint, by its family row's `tiny_checkpoint_tokenizer`.
TINY_CHECKPOINT_TOKENIZERS = {
    "wordpiece": wordpiece_tokenizer,
    "wordpiece-without-token-types": wordpiece_tokenizer_without_token_types,
    "byte-level-bpe": byte_level_bpe_tokenizer,
}


def make_tiny_source(folder, family, tokenizer_path, glue_dir):
    """A 2-layer random checkpoint of `family`'s own base model (hidden 32) with a tokenizer of its kind and the
    config its row's `tiny_checkpoint_config` gives it, the special token ids its tokenizer's."""
    family = get_family(family)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = TINY_CHECKPOINT_TOKENIZERS[family.tiny_checkpoint_tokenizer](folder, tokenizer_path, glue_dir)
    size = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37)
    settings = {"max_position_embeddings": 64, **family.tiny_checkpoint_config}
    token_ids = {field: getattr(tokenizer, attribute) for field, attribute in family.token_id_fields}
    config_class = getattr(transformers, f"{family.transformers_prefix}Config")
    config = config_class(vocab_size=len(tokenizer), **size, **settings, **token_ids)
    getattr(transformers, f"{family.transformers_prefix}Model")(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def write_tsv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ([header] if header is not None else []) + rows
    path.write_text("".join("\t".join(map(str, row)) + "\n" for row in lines), encoding="utf-8")


def write_synthetic_glue(root):
    """Tiny CoLA, STS-B, MNLI, QQP, QNLI and WNLI folders in the original GLUE formats (no header for CoLA,
    12 columns in MNLI's train.tsv and 16 in its dev files, STS-B scores on 0..5)."""
    sentences = ["the film was great .", "it was dull", 'a "quoted" line', "NA", "what a film !", "not at all"]
    write_tsv(
        root / "CoLA" / "train.tsv",
        None,
        [("gj04", i % 2, "*" if i % 2 == 0 else "", s) for i, s in enumerate(sentences)],
    )
    write_tsv(root / "CoLA" / "dev.tsv", None, [("gj04", i % 2, "", s) for i, s in enumerate(sentences[:4])])
    stsb_header = (
        "index",
        "genre",
        "filename",
        "year",
        "old_index",
        "source1",
        "source2",
        "sentence1",
        "sentence2",
        "score",
    )
    stsb = [
        (i, "main-captions", "MSRvid", "2012test", i, "none", "none", s, s[::-1], f"{i * 0.8:.3f}")
        for i, s in enumerate(sentences)
    ]
    write_tsv(root / "STS-B" / "train.tsv", stsb_header, stsb)
    write_tsv(root / "STS-B" / "dev.tsv", stsb_header, stsb[:4])
    parse = ("( x )", "( y )", "(ROOT x)", "(ROOT y)")
    nli = ("entailment", "neutral", "contradiction")
    mnli_train = (
        "index",
        "promptID",
        "pairID",
        "genre",
        "sentence1_binary_parse",
        "sentence2_binary_parse",
        "sentence1_parse",
        "sentence2_parse",
        "sentence1",
        "sentence2",
        "label1",
        "gold_label",
    )
    write_tsv(
        root / "MNLI" / "train.tsv",
        mnli_train,
        [(i, i, f"{i}e", "fiction", *parse, s, s.upper(), nli[i % 3], nli[i % 3]) for i, s in enumerate(sentences)],
    )
    mnli_dev = mnli_train[:10] + ("label1", "label2", "label3", "label4", "label5", "gold_label")
    for name in ("dev_matched.tsv", "dev_mismatched.tsv"):
        rows = [
            (i, i, f"{i}e", "travel", *parse, s, s.lower(), *[nli[(i + 1) % 3]] * 5, nli[(i + 1) % 3])
            for i, s in enumerate(sentences[: 3 if "mis" in name else 4])
        ]
        write_tsv(root / "MNLI" / name, mnli_dev, rows)
    qqp_header = ("id", "qid1", "qid2", "question1", "question2", "is_duplicate")
    write_tsv(
        root / "QQP" / "train.tsv",
        qqp_header,
        [(i, 2 * i, 2 * i + 1, s + " ?", s, i % 2) for i, s in enumerate(sentences)],
    )
    write_tsv(
        root / "QQP" / "dev.tsv",
        qqp_header,
        [(i, 2 * i, 2 * i + 1, s + " ?", s, i % 2) for i, s in enumerate(sentences[:4])],
    )
    for folder, header, labels in (
        ("QNLI", ("index", "question", "sentence", "label"), ("entailment", "not_entailment")),
        ("WNLI", ("index", "sentence1", "sentence2", "label"), (0, 1)),
    ):
        for name, count in (("train.tsv", 6), ("dev.tsv", 4)):
            write_tsv(
                root / folder / name, header, [(i, s, s[::-1], labels[i % 2]) for i, s in enumerate(sentences[:count])]
            )
    return root


def run_glue(args, cwd, env=None, launcher=None, timeout=600):
    """Runs scripts/run_glue.py in a fresh process; returns the CompletedProcess (never raises on failure)."""
    command = (launcher or [sys.executable]) + [str(RUN_GLUE)] + [str(arg) for arg in args]
    full_env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", OMP_NUM_THREADS="1", **(env or {}))
    return subprocess.run(command, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def read_json(path):
    return json.loads(Path(path).read_text())


def card_metadata(folder):
    """The YAML metadata of a saved model card, as the Hub reads it."""
    from huggingface_hub import ModelCard

    return ModelCard.load(Path(folder) / "README.md").data.to_dict()
