"""Invariants over random inputs (hypothesis): random small configs (family, head, context type, targets, layers,
rank, gate, pooling) and random batches (lengths, padding side, all-padding rows, a batch of one, a sequence of one
token). Padding never changes a real token or a sentence's output; `none` is the family's transformers model; a
save and load gives the same model; eager equals sdpa; fp32 equals fp64 within tolerance; bf16 stays finite. Any
JSON value of any CASAN option in a saved classifier's config.json, of any family, is refused naming the option, or
loads a working model whose loss, labels given, is finite.

CI runs the derandomized `ci` profile (a fixed example count, the same examples every run); the `long` profile
draws many more, new ones each time: `pytest tests/test_properties.py --hypothesis-profile long` (docs/ROBUSTNESS.md).
"""

import json

import pytest
import torch
import transformers
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from tiny_models import (
    assert_outputs_close,
    assert_same_weights,
    attention_implementations,
    comparable_outputs,
    tiny_config,
    tiny_source_config,
)

from casan_hf import FAMILIES, casan_class, casan_twin, get_family, get_head
from casan_hf.options import CLASSIFIER_POOLINGS, OPTIONS


HEADS = ("base", "sequence-classification", "token-classification")
FAMILY_NAMES = tuple(family.name for family in FAMILIES)
WIDTHS = {16: 2, 32: 4}  # hidden size: attention heads
SIZES = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "embedding_size")
SIZES += ("num_labels",)


@st.composite
def casan_configs(draw, context_types=("global", "deep", "deep_global")):
    """A tiny CASAN config of a random family, shape and set of context options, and a head for it."""
    layers = draw(st.integers(1, 3))
    hidden = draw(st.sampled_from(sorted(WIDTHS)))
    options = dict(
        context_type=draw(st.sampled_from(context_types)),
        context_targets=draw(st.sampled_from([["query"], ["key"], ["query", "key"]])),
        context_layers=draw(st.none() | st.lists(st.integers(0, layers - 1), min_size=1, unique=True).map(sorted)),
        context_rank=draw(st.none() | st.integers(1, 4)),
        gate=draw(st.sampled_from(["dynamic", "fixed"])),
        fixed_gate=draw(st.sampled_from([0.1, 0.9])),
        gate_bias_init=draw(st.sampled_from([-4.0, 0.0, 2.0])),  # open gates make the context matter
        classifier_pooling=draw(st.sampled_from(CLASSIFIER_POOLINGS)),
        pooling_hops=2,
        pooling_hidden=8,
    )
    if options["context_type"] == "deep":  # its first layer reads no earlier one: a later layer must take context
        assume(layers > 1 and options["context_layers"] != [0])
    family = draw(st.sampled_from(FAMILY_NAMES))
    sizes = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=WIDTHS[hidden], num_labels=3)
    sizes["intermediate_size"] = 2 * hidden
    if "embedding_size" in get_family(family).tiny_config:  # a family whose embeddings may be narrower (ELECTRA)
        sizes["embedding_size"] = hidden // 2
    return family, draw(st.sampled_from(HEADS)), {**sizes, **options}


@st.composite
def batches(draw):
    """Random sentences (lengths 0 to 12: 0 is an all-padding row, 1 a sentence of one token) padded to the
    longest on a random side, at least one of them real: (input_ids, attention_mask, lengths, side)."""
    lengths = draw(st.lists(st.integers(0, 12), min_size=1, max_size=4).filter(lambda lengths: max(lengths) > 0))
    side = draw(st.sampled_from(["right", "left"]))
    width = max(lengths)
    input_ids = torch.zeros(len(lengths), width, dtype=torch.long)
    attention_mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, length in enumerate(lengths):
        tokens = torch.tensor(draw(st.lists(st.integers(5, 98), min_size=length, max_size=length)), dtype=torch.long)
        where = slice(0, length) if side == "right" else slice(width - length, width)
        input_ids[row, where] = tokens
        attention_mask[row, where] = 1
    return input_ids, attention_mask, lengths, side


def build(family, head, options, seed=0):
    torch.manual_seed(seed)
    return casan_class(family, head)(tiny_config(family, **options)).eval()


def model_inputs(family, input_ids, attention_mask, pad_token_id):
    """The padded batch as the model takes it: padding ids where the mask is 0; BERT and ELECTRA count positions
    from the first real token (RoBERTa's embeddings do so themselves, from the padding ids)."""
    inputs = {"input_ids": input_ids.masked_fill(attention_mask == 0, pad_token_id), "attention_mask": attention_mask}
    if get_family(family).name in ("bert", "electra"):
        inputs["position_ids"] = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return inputs


def model_and_inputs(config, batch):
    """The drawn config's model, the drawn batch as it takes it, and the batch's attention mask."""
    family, head, options = config
    input_ids, attention_mask, _, _ = batch
    model = build(family, head, options)
    return model, model_inputs(family, input_ids, attention_mask, model.config.pad_token_id), attention_mask


def run(model, inputs):
    with torch.no_grad():
        return comparable_outputs(model(**inputs))


def per_sentence(outputs, attention_mask):
    """Each sentence's own outputs: its real tokens' states, or its sentence-level outputs (logits, pooler)."""
    sentences = []
    for row in range(attention_mask.shape[0]):
        real = attention_mask[row].bool()
        sentences.append(
            {
                name: value[row][real] if value.dim() == 3 else value[row]
                for name, value in outputs.items()
                if name != "loss"
            }
        )
    return sentences


def assert_sentences_close(actual, expected, rows, atol, rtol):
    """`rows`' outputs (lists from `per_sentence`) in `actual` against `expected`, in `expected`'s dtype."""
    for row in rows:
        for name, value in expected[row].items():
            torch.testing.assert_close(
                actual[row][name].to(value.dtype), value, atol=atol, rtol=rtol, msg=f"{name}, row {row}"
            )


def reads_the_first_position(name, head, options):
    """Whether an output is read off the batch's first position, whatever token sits there: BERT's pooler and the
    heads that pool "cls" take the first token, which is padding in a left-padded row (as in transformers)."""
    return name == "pooler_output" or (
        head == "sequence-classification" and name == "logits" and options["classifier_pooling"] == "cls"
    )


@given(config=casan_configs(), batch=batches())
def test_padding_never_changes_a_sentence(config, batch):
    """Every sentence gives, in a padded batch (either side, next to all-padding rows), what it gives alone (what
    is read off the first position only with right padding)."""
    family, head, options = config
    input_ids, attention_mask, lengths, side = batch
    model = build(family, head, options)
    pad = model.config.pad_token_id
    batched = per_sentence(run(model, model_inputs(family, input_ids, attention_mask, pad)), attention_mask)
    for row, length in enumerate(lengths):
        if length == 0:
            assert all(torch.isfinite(value).all() for value in batched[row].values())
            continue
        real = attention_mask[row].bool()
        alone_ids, alone_mask = input_ids[row][real][None], torch.ones(1, length, dtype=torch.long)
        alone = per_sentence(run(model, model_inputs(family, alone_ids, alone_mask, pad)), alone_mask)[0]
        for name, value in alone.items():
            if side == "left" and length < len(attention_mask[row]) and reads_the_first_position(name, head, options):
                continue
            torch.testing.assert_close(batched[row][name], value, atol=1e-5, rtol=1e-4, msg=f"{name}, row {row}")


@given(config=casan_configs(context_types=("none",)), batch=batches())
def test_none_is_the_family_transformers_model(config, batch):
    family, head, options = config
    input_ids, attention_mask, _, _ = batch
    sizes = {name: value for name, value in options.items() if name in SIZES}
    torch.manual_seed(0)
    source_class = getattr(transformers, get_family(family).source_class_name(get_head(head)))
    source = source_class(tiny_source_config(family, **sizes)).eval()
    twin = casan_twin(source, context_type="none")
    inputs = model_inputs(family, input_ids, attention_mask, source.config.pad_token_id)
    expected, actual = run(source, inputs), run(twin, inputs)
    assert expected.keys() == actual.keys()
    for name, value in expected.items():
        torch.testing.assert_close(actual[name], value, atol=1e-6, rtol=1e-5, msg=name)


@given(config=casan_configs(), batch=batches())
def test_save_and_load_give_the_same_model(config, batch, tmp_path_factory):
    model, inputs, _ = model_and_inputs(config, batch)
    folder = tmp_path_factory.mktemp("saved")
    model.save_pretrained(folder)
    loaded = type(model).from_pretrained(folder).eval()
    assert loaded.config.to_diff_dict() == model.config.to_diff_dict()
    assert_same_weights(loaded, model)
    assert_outputs_close(run(loaded, inputs), run(model, inputs))


@given(config=casan_configs(), batch=batches())
def test_eager_equals_sdpa(config, batch):
    assume("sdpa" in attention_implementations(casan_class(*config[:2])))  # DeBERTa-v2 attends eagerly only
    model, inputs, attention_mask = model_and_inputs(config, batch)
    model.set_attn_implementation("sdpa")
    sdpa = per_sentence(run(model, inputs), attention_mask)
    model.set_attn_implementation("eager")
    eager = per_sentence(run(model, inputs), attention_mask)
    real_rows = [row for row in range(len(sdpa)) if attention_mask[row].any()]
    assert_sentences_close(eager, sdpa, real_rows, atol=1e-5, rtol=1e-4)


@given(config=casan_configs(), batch=batches())
def test_fp32_is_fp64_within_tolerance_and_bf16_is_finite(config, batch):
    model, inputs, attention_mask = model_and_inputs(config, batch)
    fp32 = per_sentence(run(model, inputs), attention_mask)
    fp64 = per_sentence(run(model.double(), inputs), attention_mask)
    bf16 = run(model.to(torch.bfloat16), inputs)
    assert_sentences_close(fp32, fp64, range(len(fp64)), atol=1e-4, rtol=1e-4)
    for name, value in bf16.items():
        assert torch.isfinite(value).all(), name


# --- config.json: every value of every option, whatever its JSON type --------------------------------------------

# Any JSON value, nested, integers and floats of any size (a size beyond its bound, `options.BOUNDS`, is refused
# before anything is built).
JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
JSON_VALUES = st.recursive(
    JSON_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
)
# The values a hand-edited config.json holds next to a valid one: edges of the ranges, the other options' values.
NEAR_VALID = (0, 1, 2, -1, 0.5, 1.0, 1.5, -0.0, 1e-12, 1e12, "", "None", "true", [], [0], [0, 1], [2, 0],
              ["query"], ["key", "query"], ["value"], float("inf"), float("nan"), "global", "dynamic", "headwise",
              "one", "mean")  # fmt: skip


def option_values(option):
    """What a config.json may give `option`: any JSON value, a near-valid one, or one of the option's choices."""
    own = st.sampled_from(list(option.choices)) if option.choices else st.nothing()
    return JSON_VALUES | st.sampled_from(NEAR_VALID) | own


def valid_alone(option, value):
    """Whether the option's own check takes `value` (which may still not fit the other options or the weights)."""
    try:
        option.check(value)
    except ValueError:
        return False
    return True


@pytest.fixture(scope="module")
def saved_classifiers(tmp_path_factory):
    """A saved tiny CASAN classifier of a family for a sentence vector (each pooling has options of its own), made
    when first asked for."""
    folders = {}

    def folder(family, pooling):
        if (family, pooling) not in folders:
            folders[family, pooling] = tmp_path_factory.mktemp(f"{family}-{pooling}")
            options = dict(context_type="deep_global", classifier_pooling=pooling, pooling_hops=2, pooling_hidden=8)
            model = build(family, "sequence-classification", {**options, "num_labels": 3})
            model.save_pretrained(folders[family, pooling])
        return folders[family, pooling]

    return folder


@pytest.mark.parametrize("option", OPTIONS, ids=lambda option: option.name)
@settings(max_examples=max(1, settings.default.max_examples // 16))  # a few values for each of the 22 options
@given(
    data=st.data(),
    family=st.sampled_from(FAMILY_NAMES),
    pooling=st.sampled_from(CLASSIFIER_POOLINGS),
    batch=batches(),
)
def test_any_config_json_value_is_refused_by_name_or_loads_a_working_model(
    option, data, family, pooling, batch, saved_classifiers, tmp_path_factory
):
    """One option of a saved classifier's config.json (any family's config class) set to any JSON value: loading
    it with `from_pretrained` either refuses it with a ValueError that names the option (and, where the value is not
    one of an option's choices, all of them), or gives a model whose outputs and loss (labels given, so that the
    pooling's penalties join it) are finite and survive a save and a load."""
    value = data.draw(option_values(option), label="value")
    folder = tmp_path_factory.mktemp("edited")
    for source in saved_classifiers(family, pooling).iterdir():
        (folder / source.name).write_bytes(source.read_bytes())
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, option.name: value}))
    model_class = casan_class(family, "sequence-classification")
    try:
        model = model_class.from_pretrained(folder).eval()
    except ValueError as error:
        assert option.name in str(error), str(error)
        if not valid_alone(option, value):  # refused for the value itself: what is allowed is said
            assert all(repr(choice) in str(error) for choice in option.choices or ()), str(error)
        return
    inputs = model_inputs(family, batch[0], batch[1], model.config.pad_token_id)
    inputs["labels"] = torch.arange(len(batch[2])) % model.config.num_labels
    outputs = run(model, inputs)
    assert all(torch.isfinite(output).all() for output in outputs.values()), (option.name, value)
    model.save_pretrained(folder / "again")
    assert_outputs_close(run(model_class.from_pretrained(folder / "again").eval(), inputs), outputs)
