"""The sizes of a translation model trained from scratch, and the config that makes one of them."""

# Model sizes to train from scratch. base is the paper's Transformer-base (Vaswani et al. 2017); small is the size
# commonly trained on Multi30k; tiny fits a few minutes of CPU; micro (1.95M parameters with an 8,000-piece
# vocabulary) learns real German in 5 epochs of Multi30k in under half an hour of one CPU core, the size of the
# first CPU study in docs/TRANSLATION.md; micro-deep is micro's width with the paper's encoder depth (6 layers, so
# that deep context has earlier layers to read), its decoder micro's.
MODEL_SIZES = {
    "micro": dict(d_model=128, encoder_layers=2, decoder_layers=2, attention_heads=4, ffn_dim=512),
    "micro-deep": dict(d_model=128, encoder_layers=6, decoder_layers=2, attention_heads=4, ffn_dim=512),
    "tiny": dict(d_model=256, encoder_layers=3, decoder_layers=3, attention_heads=4, ffn_dim=1024),
    "small": dict(d_model=256, encoder_layers=6, decoder_layers=6, attention_heads=4, ffn_dim=1024),
    "base": dict(d_model=512, encoder_layers=6, decoder_layers=6, attention_heads=8, ffn_dim=2048),
}


def model_config_kwargs(model_size, tokenizer, max_position_embeddings, **overrides):
    """`CasanMarianConfig` keyword arguments for a model trained from scratch: the size preset, the overrides
    given (None: keep the preset's), and the tokenizer's vocabulary and special tokens."""
    size = {**MODEL_SIZES[model_size], **{name: value for name, value in overrides.items() if value is not None}}
    return dict(
        vocab_size=len(tokenizer),
        d_model=size["d_model"],
        encoder_layers=size["encoder_layers"],
        decoder_layers=size["decoder_layers"],
        encoder_attention_heads=size["attention_heads"],
        decoder_attention_heads=size["attention_heads"],
        encoder_ffn_dim=size["ffn_dim"],
        decoder_ffn_dim=size["ffn_dim"],
        dropout=size.get("dropout", 0.1),
        activation_function="relu",
        scale_embedding=True,
        max_position_embeddings=max_position_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        forced_eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
