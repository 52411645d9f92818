"""The two tables that name every CASAN model class: `HEADS`, the six heads, and `FAMILIES`, the six families of
checkpoints CASAN converts (BERT, RoBERTa, XLM-RoBERTa, ELECTRA, ModernBERT, DeBERTa-v2/v3). A model class is one
head of one family (`CasanRobertaForSequenceClassification`); its name, model type, config class, base model prefix,
the transformers class it mirrors and its `auto_map` entry are all read from its two rows here. A family's row also
holds the configs the benchmark and the tests build of it.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Head:
    """One CASAN head, built for every family. Whatever differs from head to head is a field here, so that no code
    asks a head for its name to decide what to do.

    `name` is what the converter's `--head` and the model card call it; `suffix` ends the class names
    (`CasanRobertaForSequenceClassification`, and transformers' `RobertaForSequenceClassification` it
    mirrors); `pipeline_task` the transformers pipeline that serves it (None where transformers has none);
    `pools_sentence` whether it classifies a sentence vector, and so takes the "pooling" options;
    `takes_num_labels` whether its output width is the user's `num_labels`; `bare` whether it is the encoder
    alone, whose output is the hidden states (what a sentence-transformers pipeline wraps); `takes_choices`
    whether its inputs have a choices axis, `(batch_size, num_choices, sequence_length)`, each choice one text;
    `pretrains` whether training it is (continued) pre-training on raw text rather than fine-tuning on labels.

    Two fields are for the tools around a model, which read them here: `prediction`, how
    `casan_hf.inspection.predict` reads the head's logits for one text, as its pipeline would ("labels",
    "choice", "tags", "answer", "fills", "next-tokens"; None: no prediction), and `untrained`, what the model card
    warns of while the head's weights are random.
    """

    name: str
    suffix: str
    auto_class: str
    pipeline_task: str | None
    pools_sentence: bool = False
    takes_num_labels: bool = False
    bare: bool = False
    takes_choices: bool = False
    pretrains: bool = False
    prediction: str | None = None
    untrained: str = "its outputs are random until it is fine-tuned"

    @property
    def hub_task(self):
        """The Hub task type a model card files the head's scores under: its pipeline's, else its name."""
        return self.pipeline_task or self.name


HEADS = (
    Head("base", "Model", "AutoModel", "feature-extraction", bare=True),
    Head(
        "sequence-classification",
        "ForSequenceClassification",
        "AutoModelForSequenceClassification",
        "text-classification",
        pools_sentence=True,
        takes_num_labels=True,
        prediction="labels",
    ),
    Head(
        "token-classification",
        "ForTokenClassification",
        "AutoModelForTokenClassification",
        "token-classification",
        takes_num_labels=True,
        prediction="tags",
    ),
    Head("question-answering", "ForQuestionAnswering", "AutoModelForQuestionAnswering", None, prediction="answer"),
    Head(
        "multiple-choice",
        "ForMultipleChoice",
        "AutoModelForMultipleChoice",
        None,
        pools_sentence=True,
        takes_choices=True,
        prediction="choice",
    ),
    Head(
        "masked-lm",
        "ForMaskedLM",
        "AutoModelForMaskedLM",
        "fill-mask",
        pretrains=True,
        prediction="fills",
        untrained="fill-mask predicts random words (p ~ 1 / vocabulary size) until the MLM head is trained, by "
        "continued masked-LM pre-training",
    ),
)


# The heads of the causal families beside `HEADS`' sequence classification (on the last real token, as transformers'
# causal classifiers read it): the language model, which generates.
CAUSAL_HEADS = (
    Head(
        "causal-lm",
        "ForCausalLM",
        "AutoModelForCausalLM",
        "text-generation",
        pretrains=True,
        prediction="next-tokens",
        untrained="text-generation writes random tokens until the model is trained",
    ),
)


def get_head(name):
    """The head called `name`, or a ValueError listing them all."""
    for head in (*HEADS, *CAUSAL_HEADS):
        if head.name == name:
            return head
    names = ", ".join(head.name for head in (*HEADS, *CAUSAL_HEADS))
    raise ValueError(f"Unknown head {name!r}; choose one of {names}.")


@dataclass(frozen=True)
class Family:
    """One family of checkpoints that CASAN converts (encoders, or causal LMs: `CAUSAL_FAMILIES`): its checkpoints'
    `model_type` (`name`), the
    prefix of transformers' class names (`RobertaForMaskedLM`) and of CASAN's (`CasanRobertaForMaskedLM`;
    BERT's classes keep the plain `CasanModel`, ...), and the attribute that holds the encoder in every head
    (`roberta.encoder.layer.0...`). A CASAN checkpoint of the family says `model_type` "casan_<name>";
    `modeling_module` is the model file that writes its classes out, `configuration_module` the one of its config
    class; `minimum_transformers` the oldest transformers its folders load with, where it is newer than the
    package's (`compat.MINIMUM_TRANSFORMERS`); `head_names` the heads it is built with (None: the encoders' `HEADS`),
    `source_suffixes` where transformers names a head's class otherwise (GPT-2's `GPT2LMHeadModel`).

    The config values the tools around the models need for the family, here so that a new family is one row and no
    table elsewhere is keyed by its name (the models never read them; they are no part of the row's identity, so
    that a family equals another by its names alone):
    - `benchmark_config`: what the benchmark's configs take beside their size where the family's config defaults are
      not the checkpoints people use, so that the benchmark times the models people run;
    - `tiny_config`: what the tests' tiny random config (`tests/tiny_models.py`) adds, so that every path of the
      family runs at the tests' tiny size;
    - `tiny_checkpoint_config` and `tiny_checkpoint_tokenizer`: what the scripts' tests' tiny saved checkpoint of the
      source model adds to its size, and the kind of tokenizer saved with it ("wordpiece": MiniLM's;
      "wordpiece-without-token-types": MiniLM's, without the token type ids the family's models do not take;
      "byte-level-bpe": one trained on the data, RoBERTa's kind), so that it is the family's as its checkpoints are;
    - `token_id_fields`: the config's fields that name a special token, (config field, tokenizer attribute) pairs,
      so that a config made for a tokenizer takes those tokens' ids from it.
    """

    name: str
    transformers_prefix: str
    class_prefix: str
    base_model_prefix: str
    modeling_module: str = "modeling_casan"
    configuration_module: str = "configuration_casan"
    minimum_transformers: str | None = None
    benchmark_config: dict = field(default_factory=dict, compare=False)
    tiny_config: dict = field(default_factory=dict, compare=False)
    tiny_checkpoint_config: dict = field(default_factory=dict, compare=False)
    tiny_checkpoint_tokenizer: str = field(default="wordpiece", compare=False)
    token_id_fields: tuple = field(default=(("pad_token_id", "pad_token_id"),), compare=False)
    head_names: tuple | None = None
    source_suffixes: dict = field(default_factory=dict, compare=False)

    @property
    def heads(self):
        """The rows of the heads the family is built with: an encoder's are `HEADS` (`head_names` None, read when
        asked, as the table may grow), a causal family's its own."""
        return HEADS if self.head_names is None else tuple(get_head(name) for name in self.head_names)

    @property
    def causal(self):
        """Whether the family is a causal language model's (its context reads only the positions up to each)."""
        return self.head_names is not None and "causal-lm" in self.head_names

    @property
    def model_type(self):
        return f"casan_{self.name}"

    @property
    def config_class_name(self):
        return f"Casan{self.class_prefix}Config"

    def class_name(self, head):
        return f"Casan{self.class_prefix}{head.suffix}"

    def source_class_name(self, head):
        return f"{self.transformers_prefix}{self.source_suffixes.get(head.name, head.suffix)}"

    def auto_map(self):
        """Every class a saved folder of this family can be loaded as with `trust_remote_code=True`."""
        return {
            "AutoConfig": f"{self.configuration_module}.{self.config_class_name}",
            **{head.auto_class: f"{self.modeling_module}.{self.class_name(head)}" for head in self.heads},
        }


# DeBERTa-v3's relative attention (log buckets, both position terms, shared keys, LayerNorm on the relative
# embeddings, no absolute positions), in the few buckets of the tests' tiny configs.
DEBERTA_V3_ATTENTION = {
    "relative_attention": True,
    "pos_att_type": ["p2c", "c2p"],
    "position_buckets": 8,
    "max_relative_positions": 16,
    "share_att_key": True,
    "norm_rel_ebd": "layer_norm",
    "position_biased_input": False,
}
# RoBERTa's and XLM-RoBERTa's: their positions start after the padding index, so a checkpoint has 2 positions more
# than its longest input (514 for 512 tokens: the config's default 512 fails at sequence 512; 66 for the tests' 64),
# and one token type; their tokenizer is a byte-level BPE.
ROBERTA_SETTINGS = dict(
    benchmark_config={"max_position_embeddings": 514},
    tiny_checkpoint_config={"type_vocab_size": 1, "max_position_embeddings": 66},
    tiny_checkpoint_tokenizer="byte-level-bpe",
)
# ELECTRA's embeddings narrower than the hidden states (projected), so that the projection runs.
ELECTRA_TINY_EMBEDDINGS = {"embedding_size": 16}

FAMILIES = (
    Family("bert", "Bert", "", "bert"),
    Family("roberta", "Roberta", "Roberta", "roberta", **ROBERTA_SETTINGS),
    Family("xlm-roberta", "XLMRoberta", "XLMRoberta", "roberta", **ROBERTA_SETTINGS),
    Family(
        "electra",
        "Electra",
        "Electra",
        "electra",
        tiny_config=ELECTRA_TINY_EMBEDDINGS,
        tiny_checkpoint_config=ELECTRA_TINY_EMBEDDINGS,
    ),
    Family(
        "modernbert",
        "ModernBert",
        "ModernBert",
        "model",
        modeling_module="modeling_casan_modernbert",
        configuration_module="configuration_casan_modernbert",
        minimum_transformers="5.2",
        # The special tokens inside the tiny vocabulary, and a window of 4 tokens, so that the sliding-window layers
        # (the second and third of three) see less than the tests' sentences; the checkpoint's window is 8 tokens.
        tiny_config={
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "cls_token_id": 1,
            "sep_token_id": 2,
            "local_attention": 4,
        },
        tiny_checkpoint_config={"local_attention": 8},
        tiny_checkpoint_tokenizer="wordpiece-without-token-types",
        # ModernBERT's config names its sentence's first and last tokens twice: bos is [CLS], eos is [SEP].
        token_id_fields=(
            ("pad_token_id", "pad_token_id"),
            ("bos_token_id", "cls_token_id"),
            ("cls_token_id", "cls_token_id"),
            ("eos_token_id", "sep_token_id"),
            ("sep_token_id", "sep_token_id"),
        ),
    ),
    Family(
        "deberta-v2",
        "DebertaV2",
        "DebertaV2",
        "deberta",
        modeling_module="modeling_casan_deberta_v2",
        configuration_module="configuration_casan_deberta_v2",
        # `DebertaV2Config`'s defaults have no relative attention, so the benchmark runs DeBERTa-v3-base's config.json:
        # relative attention in 256 log buckets, both position terms, shared keys, LayerNorm on the relative
        # embeddings, no absolute positions.
        benchmark_config={**DEBERTA_V3_ATTENTION, "position_buckets": 256, "max_relative_positions": -1},
        # v3's relative attention with v2's convolution after the first layer, so that every path runs; the
        # checkpoint is v3's (the model reads no token types; its tokenizer is WordPiece all the same, since a
        # SentencePiece model cannot be trained here).
        tiny_config={**DEBERTA_V3_ATTENTION, "conv_kernel_size": 3},
        tiny_checkpoint_config=DEBERTA_V3_ATTENTION,
    ),
)


# The causal language models' families: their context reads each position's prefix (docs/FAMILIES.md, "Causal language
# models"), and their heads are the bare decoder, the language model and sequence classification (on the last real
# token). Their checkpoints take Llama's layout (separate q_proj and k_proj, rotary positions) but for GPT-2's (a fused
# c_attn, learned positions).
CAUSAL_HEAD_NAMES = ("base", "causal-lm", "sequence-classification")
CAUSAL_SETTINGS = dict(
    modeling_module="modeling_casan_causal",
    configuration_module="configuration_casan_causal",
    minimum_transformers="5.4",
    head_names=CAUSAL_HEAD_NAMES,
)
CAUSAL_FAMILIES = (
    Family("llama", "Llama", "Llama", "model", **CAUSAL_SETTINGS),
    Family("qwen2", "Qwen2", "Qwen2", "model", **CAUSAL_SETTINGS),
    Family("qwen3", "Qwen3", "Qwen3", "model", **CAUSAL_SETTINGS),
    Family("gpt2", "GPT2", "GPT2", "transformer", source_suffixes={"causal-lm": "LMHeadModel"}, **CAUSAL_SETTINGS),
)


def get_family(model_type):
    """The family of a checkpoint's `model_type`, its own ("roberta") or CASAN's ("casan_roberta"), encoder or causal,
    or a ValueError naming the types CASAN loads."""
    for family in (*FAMILIES, *CAUSAL_FAMILIES):
        if model_type in (family.name, family.model_type):
            return family
    allowed = [name for family in (*FAMILIES, *CAUSAL_FAMILIES) for name in (family.name, family.model_type)]
    raise ValueError(
        f"Checkpoint has model_type {model_type!r}; CASAN models load {', '.join(map(repr, allowed))} checkpoints."
    )
