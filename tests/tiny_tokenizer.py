"""A word-level BERT tokenizer over a few dozen words, for the tiny random models (vocab_size 99)."""

from transformers import BertTokenizer


WORDS = "the a film was funny gripping and dull i liked it not at all , . ! ?".split()
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_tokenizer(folder, token_types=True):
    """Writes the vocabulary into `folder` and returns the tokenizer (saved there too); without `token_types`, it
    gives no token type ids, as the tokenizer of a family without them (a model's `has_token_types`)."""
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(SPECIAL + WORDS) + "\n")
    input_names = ["input_ids", "token_type_ids", "attention_mask"] if token_types else ["input_ids", "attention_mask"]
    tokenizer = BertTokenizer(str(vocab), model_input_names=input_names)
    tokenizer.save_pretrained(folder)
    return tokenizer
