"""A word-level BERT tokenizer over a few dozen words, for the tiny random models (vocab_size 99)."""

from transformers import BertTokenizer


WORDS = "the a film was funny gripping and dull i liked it not at all , . ! ?".split()
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_tokenizer(folder):
    """Writes the vocabulary into `folder` and returns the tokenizer (saved there too)."""
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(SPECIAL + WORDS) + "\n")
    tokenizer = BertTokenizer(str(vocab))
    tokenizer.save_pretrained(folder)
    return tokenizer
