"""The joint subword tokenizer a translation run trains on both languages of its training data."""

from transformers import PreTrainedTokenizerFast


# The trained tokenizer's special tokens, in id order, the first ids of every vocabulary `train_tokenizer` makes:
# padding (also the decoder's start, as in Marian), end of sentence, unknown.
PAD, EOS, UNK = SPECIAL_TOKENS = ("<pad>", "</s>", "<unk>")


class PortableTokenizer(PreTrainedTokenizerFast):
    """transformers 5's fast tokenizer saved under the class name both 4.x and 5 load: its tokenizer_config.json
    would name `TokenizersBackend`, which transformers 4.x does not know, so that a folder or Hub repo with the
    tokenizer of a translation run would load its model on 4.x but not its tokenizer."""


PortableTokenizer.__name__ = PortableTokenizer.__qualname__ = "PreTrainedTokenizerFast"


def train_tokenizer(datasets, source_lang, target_lang, vocab_size, model_max_length):
    """A joint BPE tokenizer trained on both sides of `datasets["train"]`, as a `PreTrainedTokenizerFast`.

    Metaspace pre-tokenization keeps the spaces in the pieces, so decoding gives back the detokenized text that
    sacreBLEU scores; every sequence ends in `</s>`, as Marian's do. The saved tokenizer names the inputs the
    model takes: without that, transformers 4.x returns token type ids, which a translation model refuses.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False)

    def sentences():
        for pair in datasets["train"]["translation"]:
            yield pair[source_lang]
            yield pair[target_lang]

    tokenizer.train_from_iterator(sentences(), trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS}", special_tokens=[(EOS, tokenizer.token_to_id(EOS))]
    )
    return PortableTokenizer(
        tokenizer_object=tokenizer,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        model_max_length=model_max_length,
        model_input_names=["input_ids", "attention_mask"],
    )
