"""The causal language-model study (docs/CAUSAL.md): its data, a text cut in order at blank lines into training,
validation and test parts (`split_at_blank_lines`) with a byte-level BPE tokenizer trained on the training part
alone (`train_byte_level_tokenizer`), written once into a folder the runs read (`prepare_data`)."""

import json
from pathlib import Path


SPLITS = ("train", "validation", "test")
# The token that ends a text, and starts and pads none: the tokenizer adds no special token to the text it encodes.
END_OF_TEXT = "<|endoftext|>"
TOKENIZER_FOLDER = "tokenizer"


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


def prepare_data(text_file, folder, shares, vocab_size, model_max_length):
    """Writes into `folder` the parts of `text_file` (`<split>.txt`, `split_at_blank_lines`) and the tokenizer
    trained on the training part (`TOKENIZER_FOLDER`), unless they are there already as this would write them, and
    returns `{split: path}` with the tokenizer's folder under "tokenizer". A folder holding other files is refused:
    nothing a run read is overwritten."""
    folder = Path(folder)
    parts = split_at_blank_lines(Path(text_file).read_text(encoding="utf-8"), shares)
    paths = {split: folder / f"{split}.txt" for split in SPLITS}
    tokenizer_folder = folder / TOKENIZER_FOLDER
    tokenizer = train_byte_level_tokenizer([parts[0]], vocab_size, model_max_length)
    if folder.exists():
        for split, part in zip(SPLITS, parts, strict=True):
            if not paths[split].is_file() or paths[split].read_text(encoding="utf-8") != part:
                raise ValueError(f"{paths[split]} is not the {split} part this study cuts: give another folder.")
        saved = json.loads((tokenizer_folder / "tokenizer.json").read_text(encoding="utf-8"))
        if saved != json.loads(tokenizer.backend_tokenizer.to_str()):
            raise ValueError(f"{tokenizer_folder} is not the tokenizer this study trains: give another folder.")
    else:
        folder.mkdir(parents=True)
        for split, part in zip(SPLITS, parts, strict=True):
            paths[split].write_text(part, encoding="utf-8")
        tokenizer.save_pretrained(tokenizer_folder)
    return {**{split: str(path) for split, path in paths.items()}, "tokenizer": str(tokenizer_folder)}
