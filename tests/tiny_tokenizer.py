"""A word-level BERT tokenizer over a few dozen words, for the tiny random models (vocab_size 99; the causal ones'
CAUSAL_VOCAB of 40 holds it too)."""

from tokenizers.processors import TemplateProcessing
from transformers import BertTokenizer, PreTrainedTokenizerFast


WORDS = "the a film was funny gripping and dull i liked it not at all , . ! ?".split()
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# A chat's roles, words of their own after WORDS (so that WORDS' ids stay as they were), and its template: each turn
# is its role, its text and [SEP], the end of sequence of the chat tokenizer.
ROLES = ["system", "user", "assistant"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }} {{ message['content'] }} [SEP] {% endfor %}"
    "{% if add_generation_prompt %}assistant {% endif %}"
)


def tiny_tokenizer(folder, token_types=True, chat=False):
    """Writes the vocabulary into `folder` and returns the tokenizer (saved there too); without `token_types`, it
    gives no token type ids, as the tokenizer of a family without them (a model's `has_token_types`). With `chat`, the
    tokenizer of a causal LM over the same words: it starts each text with [CLS], its start of sequence, and adds
    nothing at the end (as Llama's adds its BOS alone: lm-evaluation-harness splits a context from its continuation
    so), [SEP] ends a sequence, and CHAT_TEMPLATE writes chats (TRL's trainers, a chat server)."""
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(SPECIAL + WORDS + ROLES) + "\n")
    input_names = ["input_ids", "token_type_ids", "attention_mask"] if token_types else ["input_ids", "attention_mask"]
    tokenizer = BertTokenizer(str(vocab), model_input_names=input_names)
    if chat:
        words = tokenizer.backend_tokenizer
        start = ("[CLS]", tokenizer.cls_token_id)
        words.post_processor = TemplateProcessing(single="[CLS] $A", pair="[CLS] $A $B", special_tokens=[start])
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_object=words,
            bos_token="[CLS]",
            eos_token="[SEP]",
            pad_token="[PAD]",
            unk_token="[UNK]",
            chat_template=CHAT_TEMPLATE,
            model_input_names=input_names,
        )
    tokenizer.save_pretrained(folder)
    return tokenizer
