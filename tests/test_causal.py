"""Context-aware self-attention in causal language models (Llama, Qwen2, Qwen3, GPT-2), against transformers' own
classes with the same weights: `none` and a conversion give their logits exactly; the context reads no future token;
cached decoding (greedy, sampling, beam search, a left-padded batch, a continued prompt) gives the logits and tokens of
full forwards; packed sequences restart the prefix sums; what would lose the running sums is refused by name; every
class returns its gates as the encoders do; gradient checkpointing gives a plain step's losses, gates and gradients
exactly; a saved folder loads in a fresh process without casan_hf."""

import inspect
import json
import subprocess
import sys
import threading

import pytest
import torch
import transformers
from conftest import load_script
from fresh_process import run_without_casan_hf
from tiny_models import CAUSAL_VOCAB, tiny_causal_config, tiny_causal_source_config, tiny_source_config
from tiny_tokenizer import tiny_tokenizer
from transformers import DynamicCache, GenerationConfig
from transformers.generation.utils import GenerationMixin

from casan_hf import CAUSAL_FAMILIES, CasanCache, casan_class
from casan_hf.configuration_casan_causal import MINIMUM_TRANSFORMERS_CAUSAL
from casan_hf.hub.checks import check_folder
from casan_hf.modeling_casan_causal import GENERATION_HOOKS, PREFIX_BLOCK, prefix_means, prefix_sums
from casan_hf.training import gate_means


FAMILY_NAMES = [family.name for family in CAUSAL_FAMILIES]
CONTEXTS = ["global", "deep_global", "deep"]


def saved_source(family, folder, head="causal-lm", **overrides):
    """A random transformers model of `family` and `head`, saved to `folder`: the checkpoint a user converts."""
    torch.manual_seed(0)
    source_class = getattr(
        transformers, casan_class(family, head).family.source_class_name(casan_class(family, head).casan_head)
    )
    model = source_class(tiny_causal_source_config(family, **overrides)).eval()
    model.save_pretrained(folder)
    return model


def trained_context(family, context, **options):
    """A CASAN causal LM of `family` with its context open (the authors' gate start, random U), as after training."""
    torch.manual_seed(0)
    config = tiny_causal_config(family, context_type=context, gate_bias_init=0.0, **options)
    return casan_class(family, "causal-lm")(config).eval()


def left_padded_batch():
    """Two prompts of 5 and 3 tokens, left-padded, with their mask."""
    ids = torch.tensor([[5, 9, 11, 7, 3], [0, 0, 8, 4, 6]])
    return ids, (ids != 0).long()


@pytest.mark.parametrize("family", FAMILY_NAMES)
@pytest.mark.parametrize("head", ["causal-lm", "sequence-classification"])
def test_none_and_a_converted_checkpoint_give_the_source_logits_exactly(family, head, tmp_path):
    """`none` has no new parameter; every context kind, converted, starts its gates scaled by exactly 0: the logits
    equal the source model's to the bit, on a right-padded batch."""
    overrides = {"num_labels": 3} if head == "sequence-classification" else {}
    source = saved_source(family, tmp_path, head, **overrides)
    ids, mask = torch.tensor([[5, 9, 11, 7, 3], [8, 4, 6, 0, 0]]), torch.tensor([[1] * 5, [1, 1, 1, 0, 0]])
    with torch.no_grad():
        expected = source(input_ids=ids, attention_mask=mask).logits
    for context in ["none", *CONTEXTS]:
        model = casan_class(family, head).from_pretrained(tmp_path, context_type=context).eval()
        assert model.config.context_start == ("gate" if context == "none" else "zero")
        with torch.no_grad():
            assert torch.equal(model(input_ids=ids, attention_mask=mask).logits, expected), (family, head, context)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_greedy_generation_of_a_converted_checkpoint_is_the_source_s(family, tmp_path):
    source = saved_source(family, tmp_path)
    model = casan_class(family, "causal-lm").from_pretrained(tmp_path, context_type="deep_global").eval()
    ids, mask = left_padded_batch()
    settings = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    expected = source.generate(input_ids=ids, attention_mask=mask, **settings)
    assert torch.equal(model.generate(input_ids=ids, attention_mask=mask, **settings), expected)


@pytest.mark.parametrize("context", CONTEXTS)
def test_a_converted_context_trains_from_its_exact_start(context, tmp_path):
    """At the exact start the gates' factors get gradients; once they move, every context parameter does."""
    saved_source("llama", tmp_path)
    model = casan_class("llama", "causal-lm").from_pretrained(tmp_path, context_type=context)
    ids = torch.randint(3, CAUSAL_VOCAB, (2, 6))
    model(input_ids=ids, labels=ids).loss.backward()
    scales = {name: p.grad for name, p in model.named_parameters() if name.endswith("context_scale")}
    assert scales and all(grad is not None and grad.abs().sum() > 0 for grad in scales.values())
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("context_scale"):
                parameter.fill_(0.5)
    model.zero_grad()
    model(input_ids=ids, labels=ids).loss.backward()
    for name, parameter in model.named_parameters():
        if ".context_mixer." in name:
            assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


@pytest.mark.parametrize("family", FAMILY_NAMES)
@pytest.mark.parametrize("context", CONTEXTS)
def test_the_context_reads_no_future_token(family, context):
    """Changing the last token changes no earlier position's logits, whatever the context."""
    model = trained_context(family, context)
    ids = torch.randint(3, CAUSAL_VOCAB, (1, 7))
    changed = ids.clone()
    changed[0, -1] = (ids[0, -1] + 1) % CAUSAL_VOCAB
    with torch.no_grad():
        before, after = model(input_ids=ids).logits, model(input_ids=changed).logits
    torch.testing.assert_close(before[:, :-1], after[:, :-1], rtol=0, atol=0)
    assert not torch.equal(before[:, -1], after[:, -1])


@pytest.mark.parametrize("family", FAMILY_NAMES)
@pytest.mark.parametrize("context", CONTEXTS)
def test_cached_decoding_gives_the_logits_of_a_full_forward(family, context):
    """A left-padded prompt, then one token at a time through the cache (a `CasanCache` where the context keeps running
    sums, transformers' own for `deep`, which keeps none): every step's logits are those of a full
    forward over the same tokens (to float32 rounding), and the padding changes no real token's logits."""
    model = trained_context(family, context, gate_per_head=family in ("qwen3", "gpt2"))
    ids, mask = left_padded_batch()
    steps = torch.randint(3, CAUSAL_VOCAB, (2, 4))
    with torch.no_grad():
        output = model(input_ids=ids, attention_mask=mask, use_cache=True)
        cache = output.past_key_values
        assert isinstance(cache, CasanCache) == (context != "deep")  # deep's context keeps no running sums
        for step in range(steps.shape[1]):
            mask = torch.cat([mask, torch.ones(2, 1, dtype=mask.dtype)], dim=1)
            cached = model(input_ids=steps[:, step : step + 1], attention_mask=mask, past_key_values=cache).logits
            full_ids = torch.cat([ids, steps[:, : step + 1]], dim=1)
            full = model(input_ids=full_ids, attention_mask=mask, use_cache=False).logits[:, -1:]
            torch.testing.assert_close(cached, full, rtol=1e-5, atol=1e-5)
        # positions count the real tokens, as generate() gives them (GPT-2's are learned, absolute)
        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
        alone = model(input_ids=torch.cat([ids, steps], dim=1)[1:, 2:], use_cache=False).logits
        padded = model(
            input_ids=torch.cat([ids, steps], dim=1), attention_mask=mask, position_ids=positions, use_cache=False
        ).logits
        torch.testing.assert_close(padded[1:, 2:], alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_generate_with_the_cache_equals_generate_without_it(family):
    """Greedy, sampling with a seed, beam search (the sums reordered with the beams) and several sequences per prompt
    (the sums expanded): the same tokens with and without the cache, on a left-padded batch."""
    model = trained_context(family, "deep_global")
    ids, mask = left_padded_batch()
    modes = [
        dict(do_sample=False),
        dict(do_sample=True, top_k=5),
        dict(do_sample=False, num_beams=3, num_return_sequences=2),
        dict(do_sample=True, num_return_sequences=2),
    ]
    for mode in modes:
        outputs = []
        for use_cache in (True, False):
            torch.manual_seed(3)
            outputs.append(
                model.generate(
                    input_ids=ids, attention_mask=mask, max_new_tokens=6, pad_token_id=0, use_cache=use_cache, **mode
                )
            )
        assert torch.equal(*outputs), mode


def test_generation_continues_from_a_prompt_s_cache():
    model = trained_context("qwen2", "global")
    ids, mask = left_padded_batch()
    settings = dict(max_new_tokens=5, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        cache = model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], use_cache=True).past_key_values
    continued = model.generate(input_ids=ids, attention_mask=mask, past_key_values=cache, **settings)
    assert torch.equal(continued, model.generate(input_ids=ids, attention_mask=mask, **settings))


def test_the_base_model_called_with_its_arguments_by_position_gets_a_casan_cache():
    """Llama's base model takes (input_ids, attention_mask, position_ids, past_key_values) by position as by name: the
    cache it would make is a `CasanCache`, in the caller's place."""
    model = trained_context("llama", "global")
    ids, mask = left_padded_batch()
    with torch.no_grad():
        assert isinstance(model.base_model(ids, mask, None, None).past_key_values, CasanCache)


def test_what_would_lose_the_running_sums_is_refused_by_name():
    model = trained_context("llama", "global")
    ids, mask = left_padded_batch()
    with pytest.raises(ValueError, match="got DynamicCache"):
        model(input_ids=ids, attention_mask=mask, past_key_values=DynamicCache())
    with pytest.raises(ValueError, match="got DynamicCache"):
        model.generate(input_ids=ids, attention_mask=mask, past_key_values=DynamicCache(), max_new_tokens=2)
    with pytest.raises(ValueError, match="cache_implementation='static'"):
        model.generate(input_ids=ids, attention_mask=mask, cache_implementation="static", max_new_tokens=2)
    cache = model(input_ids=ids, attention_mask=mask, use_cache=True).past_key_values
    with pytest.raises(ValueError, match="assisted and speculative decoding"):
        cache.crop(3)
    assert not cache.is_croppable
    with pytest.raises(ValueError, match="no context sums for layer 0"):
        plain = casan_class("llama", "causal-lm")(model.config)
        filled = DynamicCache()
        filled.update(torch.zeros(2, 2, 5, 8), torch.zeros(2, 2, 5, 8), 0)
        filled.__class__ = CasanCache
        filled.context_sums = {}
        plain(input_ids=ids[:, :1], past_key_values=filled)
    with pytest.raises(ValueError, match=r"a 2D attention_mask \(batch, seq\) to average the real tokens; got 4D"):
        model(input_ids=ids, attention_mask=torch.ones(2, 1, 5, 5))
    with pytest.raises(ValueError, match="output_head_gates: a CASAN causal model has no output gate"):
        model(input_ids=ids, output_head_gates=True)


def training_batches(head="causal-lm"):
    """Two batches of other shapes, one right-padded with its mask (its labels ignoring the padding), one without a
    mask: two forwards whose runs differ. The labels are the tokens, or a class per row for a classifier."""
    ids = torch.tensor([[5, 9, 11, 7, 3, 8], [8, 4, 6, 12, 0, 0]])
    mask = (ids != 0).long()
    unpadded = torch.tensor([[7, 3, 10, 4], [6, 6, 9, 5]])
    if head == "sequence-classification":
        padded_labels, unpadded_labels = torch.tensor([0, 2]), torch.tensor([1, 1])
    else:
        padded_labels, unpadded_labels = ids.masked_fill(mask == 0, -100), unpadded
    padded = dict(input_ids=ids, attention_mask=mask, labels=padded_labels)
    return [padded, dict(input_ids=unpadded, labels=unpadded_labels)]


def training_step(model, batches):
    """Each batch's output (with its gates), forwards one after the other, then one backward of their summed loss;
    the gradients by parameter name (every parameter has one)."""
    model.zero_grad()
    outputs = [model(**batch, output_context_gates=True) for batch in batches]
    sum(output.loss for output in outputs).backward()
    return outputs, {name: parameter.grad.clone() for name, parameter in model.named_parameters()}


def assert_checkpointing_changes_no_step(model, batches):
    """`gradient_checkpointing_enable()` (transformers' default, non-reentrant) leaves a training step of `model` on
    `batches` (`training_step`) as it was without: the losses, the gates (one per layer) and every parameter's
    gradient, the context mixers' included, all of which take part. Exactly (`torch.equal`): the recomputation
    replays the forward's arithmetic on tensors laid out alike."""
    plain_outputs, plain = training_step(model, batches)
    model.gradient_checkpointing_enable()
    outputs, checkpointed = training_step(model, batches)
    assert model.is_activation_checkpointing
    for output, plain_output in zip(outputs, plain_outputs, strict=True):
        assert torch.equal(output.loss, plain_output.loss)
        assert len(output.context_gates) == model.config.num_hidden_layers
        assert all(map(torch.equal, output.context_gates, plain_output.context_gates))
    mixers = [grad for name, grad in plain.items() if ".context_mixer." in name]
    assert mixers and all(grad.abs().sum() > 0 for grad in mixers)
    for name, grad in plain.items():
        assert torch.equal(checkpointed[name], grad), name


@pytest.mark.parametrize("family", FAMILY_NAMES)
@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("start", ["gate", "zero"])
def test_gradient_checkpointing_gives_the_losses_gates_and_gradients_of_a_plain_step(family, context, start):
    """A language model's step of two forwards and one backward of their summed loss, checkpointed: each layer's
    recomputation runs in its own forward's run, and the step is a plain one's
    (`assert_checkpointing_changes_no_step`). The context counts: the authors' gate start, or
    `context_start="zero"` with its factors moved to 0.5."""
    model = trained_context(family, context, context_start=start, gate_per_head=True).train()
    if start == "zero":
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if name.endswith("context_scale"):
                    parameter.fill_(0.5)
    assert_checkpointing_changes_no_step(model, training_batches())


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_checkpointed_classifier_steps_as_a_plain_one(family):
    """A sequence classifier, whose base model is a CASAN one sharing its run (Llama's and Qwen's) or transformers'
    own (GPT-2's), checkpointed: the step is a plain one's."""
    model_class = casan_class(family, "sequence-classification")
    options = dict(context_type="deep_global", gate_bias_init=0.0)
    torch.manual_seed(0)
    model = model_class(
        model_class.config_class(**tiny_causal_source_config(family, num_labels=3).to_dict() | options)
    ).train()
    assert_checkpointing_changes_no_step(model, training_batches("sequence-classification"))


def test_a_recomputation_leaves_the_forward_s_run_and_cache_as_they_were():
    """Checkpointing every second layer, the Trainer's way (`activation_checkpointing_enable`): the checkpointed
    layers (0 and 2) keep neither keys and values nor context sums in the cache, as transformers gives them no cache,
    and layer 1 keeps both; the backward recomputes layers 2 and 0 each in a copy of the forward's run, whose sources
    and gates stay the forward's; the gradients are a plain step's."""
    model = trained_context("llama", "deep_global").train()
    runs = []
    for layer in model.model.layers:
        layer.self_attn.q_proj.register_forward_pre_hook(lambda module, args: runs.append(model.context_slot.run))
    batch = training_batches()[0]
    _, plain = training_step(model, [batch])
    model.activation_checkpointing_enable(every_n_layers=2)
    runs.clear()
    model.zero_grad()
    output = model(**batch, output_context_gates=True)
    forward = runs[1]  # layer 1's, not checkpointed: the forward's run itself
    assert [run.cache is None for run in runs] == [True, False, True]
    assert all(run.sources is forward.sources and run.gates is forward.gates for run in runs)
    cache = output.past_key_values
    assert list(cache.context_sums) == [1] and [cache.get_seq_length(index) for index in range(3)] == [0, 6, 0]
    sources, gates = dict(forward.sources), dict(forward.gates)
    output.loss.backward()
    recomputed = runs[3:]
    assert len(recomputed) == 2 and all(
        run.sources is not forward.sources and run.gates is not forward.gates for run in recomputed
    )
    for kept, now in ((sources, forward.sources), (gates, forward.gates)):
        assert kept.keys() == now.keys() and all(kept[key] is now[key] for key in kept)
    for name, parameter in model.named_parameters():
        assert torch.equal(parameter.grad, plain[name]), name


def test_reentrant_checkpointing_is_refused_by_name():
    """The context leaves a layer through the forward's run, not its arguments, which alone reentrant checkpointing
    keeps in the graph: `use_reentrant=True`, and checkpointing kwargs without `use_reentrant` (torch's checkpoint
    then takes the reentrant variant), are refused, however checkpointing is enabled."""
    model = trained_context("llama", "global")
    with pytest.raises(ValueError, match="non-reentrant gradient checkpointing only: .* got use_reentrant=True"):
        model.gradient_checkpointing_enable({"use_reentrant": True})
    with pytest.raises(ValueError, match=r"got kwargs \{'preserve_rng_state': False\} without use_reentrant"):
        model.activation_checkpointing_enable({"preserve_rng_state": False}, every_n_layers=2)
    with pytest.raises(ValueError, match=r"got kwargs \{\} without use_reentrant"):
        model.gradient_checkpointing_enable({})
    assert not any(getattr(module, "gradient_checkpointing", False) for module in model.modules())
    model.gradient_checkpointing_enable({"use_reentrant": False, "preserve_rng_state": False})
    assert model.model.layers[0].gradient_checkpointing


@pytest.mark.parametrize("family", FAMILY_NAMES)
@pytest.mark.parametrize("head", ["base", "causal-lm", "sequence-classification"])
def test_every_class_returns_its_gates_as_the_encoders_do(family, head):
    """`output_context_gates=True`, or the config's, returns one `(batch, 2, heads, n)` tensor per layer in
    transformers' output class with a `context_gates` field: 0 in deep's first layer, which takes no context, and a
    key gate per key-value head repeated over its group of query heads; `return_dict=False` puts them last in the
    tuple; the base model called alone returns them too. Not asked, the output is transformers' own."""
    model_class = casan_class(family, head)
    overrides = {"num_labels": 3} if head == "sequence-classification" else {}
    options = dict(context_type="deep", gate_bias_init=0.0, gate_per_head=True)
    torch.manual_seed(0)
    model = model_class(
        model_class.config_class(**tiny_causal_source_config(family, **overrides).to_dict() | options)
    ).eval()
    ids, mask = left_padded_batch()
    with torch.no_grad():
        plain = model(input_ids=ids, attention_mask=mask)
        outputs = model(input_ids=ids, attention_mask=mask, output_context_gates=True)
        as_tuple = model(input_ids=ids, attention_mask=mask, output_context_gates=True, return_dict=False)
        alone = model.base_model(input_ids=ids, attention_mask=mask, output_context_gates=True)
        model.config.output_context_gates = True
        by_config = model(input_ids=ids, attention_mask=mask)
    assert type(outputs).__mro__[1] is type(plain) and not hasattr(plain, "context_gates")
    gates, heads = outputs.context_gates, model.config.num_attention_heads
    assert len(gates) == 3 and all(gate.shape == (2, 2, heads, 5) for gate in gates)
    assert not gates[0].any() and all(((gate > 0) & (gate < 1)).all() for gate in gates[1:])
    group = heads // (getattr(model.config, "num_key_value_heads", None) or heads)
    for gate in gates[1:]:
        assert torch.equal(gate[:, 1], gate[:, 1, ::group].repeat_interleave(group, dim=1))
    assert len(as_tuple) == len(outputs) and torch.equal(as_tuple[0], outputs[0])
    for returned in (as_tuple[-1], alone.context_gates, by_config.context_gates):
        assert all(map(torch.equal, returned, gates))


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_gate_means_count_the_real_tokens_only(family):
    """The gate monitor's means (`gate_means`) over a right-padded batch, and over a left-padded one with the
    positions generate() gives, are those of each sentence alone: padding neither counts nor changes a real token's
    gates."""
    model = trained_context(family, "deep_global", gate_per_head=family == "gpt2")
    first, second = torch.randint(3, CAUSAL_VOCAB, (1, 5)), torch.randint(3, CAUSAL_VOCAB, (1, 3))
    pads = torch.zeros(1, 2, dtype=torch.long)
    right = torch.cat([first, torch.cat([second, pads], dim=1)])
    left = torch.cat([first, torch.cat([pads, second], dim=1)])
    left_mask = (left != 0).long()
    padded = [
        {"input_ids": right, "attention_mask": (right != 0).long()},
        {"input_ids": left, "attention_mask": left_mask,
         "position_ids": (left_mask.cumsum(-1) - 1).masked_fill(left_mask == 0, 1)},
    ]  # fmt: skip
    alone = gate_means(model, [{"input_ids": first}, {"input_ids": second}])
    assert ("gates/layer_2/key/head_3" in alone) == (family == "gpt2") and alone["gates/layer_0/query"] > 0
    for batch in padded:
        means = gate_means(model, [batch])
        assert means.keys() == alone.keys()
        for key, value in alone.items():
            assert means[key] == pytest.approx(value, abs=2e-6), key


def test_the_gates_returned_under_a_zero_start_are_the_applied_ones():
    """With `context_start="zero"` a gate is returned times its factor s, as it acts on the query and key: exactly 0
    in a converted model, and at s = 0.5 half the gate of the same weights without the factor (in the first layer,
    whose context is the same in both)."""
    plain = trained_context("llama", "global")
    scaled = trained_context("llama", "global", context_start="zero")
    missing, unexpected = scaled.load_state_dict(plain.state_dict(), strict=False)
    assert missing and all(name.endswith("context_scale") for name in missing) and not unexpected
    ids = torch.randint(3, CAUSAL_VOCAB, (2, 6))
    with torch.no_grad():
        assert not any(gate.any() for gate in scaled(input_ids=ids, output_context_gates=True).context_gates)
        for name in missing:
            scaled.get_parameter(name).fill_(0.5)
        halved = scaled(input_ids=ids, output_context_gates=True).context_gates[0]
        expected = plain(input_ids=ids, output_context_gates=True).context_gates[0]
    assert expected.min() > 0
    torch.testing.assert_close(halved, 0.5 * expected)


def test_a_cached_step_returns_the_gates_of_a_full_forward_and_generate_refuses_them():
    """A decoding step through the `CasanCache` returns its token's gates as a full forward gives them. generate()
    returns no forward's outputs: it refuses `output_context_gates=True` by name, and the config's changes none of
    its tokens."""
    model = trained_context("qwen3", "deep_global", gate_per_head=True)
    ids, mask = left_padded_batch()
    step = torch.randint(3, CAUSAL_VOCAB, (2, 1))
    longer_mask = torch.cat([mask, torch.ones(2, 1, dtype=mask.dtype)], dim=1)
    with torch.no_grad():
        cache = model(input_ids=ids, attention_mask=mask, use_cache=True).past_key_values
        cached = model(input_ids=step, attention_mask=longer_mask, past_key_values=cache, output_context_gates=True)
        full = model(input_ids=torch.cat([ids, step], dim=1), attention_mask=longer_mask, output_context_gates=True)
    for step_gates, full_gates in zip(cached.context_gates, full.context_gates, strict=True):
        assert step_gates.shape == (2, 2, 4, 1)
        torch.testing.assert_close(step_gates, full_gates[..., -1:], rtol=1e-5, atol=1e-5)
    settings = dict(input_ids=ids, attention_mask=mask, max_new_tokens=4, do_sample=False, pad_token_id=0)
    with pytest.raises(ValueError, match=r"generate\(\) returns no context gates"):
        model.generate(output_context_gates=True, **settings)
    expected = model.generate(**settings)
    model.config.output_context_gates = True
    assert torch.equal(model.generate(**settings), expected)
    assert torch.equal(model.generate(output_context_gates=False, **settings), expected)


@pytest.mark.parametrize(("option", "value"), [("local_bias", "query"), ("output_gate", "headwise")])
def test_options_a_causal_model_cannot_honour_are_refused(option, value):
    with pytest.raises(ValueError, match=f"`{option}`={value!r} is refused in a causal language model"):
        casan_class("llama", "causal-lm").config_class(
            **tiny_causal_source_config("llama").to_dict(), **{option: value}
        )


def test_generate_hooks_are_where_this_release_has_them():
    """Every private method of transformers' generation that the causal classes override exists, with the parameters
    they rely on, and generate() calls it: a release that moves one fails here."""
    for name, parameters in GENERATION_HOOKS.items():
        method = getattr(GenerationMixin, name)
        assert set(parameters) <= set(inspect.signature(method).parameters), name
        assert f"self.{name}(" in inspect.getsource(GenerationMixin.generate), name


@pytest.mark.parametrize("context", ["global", "deep_global"])
def test_packed_sequences_restart_the_prefix_sums(context):
    """Two sequences packed in one row (position ids restarting at 0, no mask, as `DataCollatorWithFlattening` makes
    them) give each sequence's logits alone."""
    model = trained_context("llama", context)
    first, second = torch.randint(3, CAUSAL_VOCAB, (1, 4)), torch.randint(3, CAUSAL_VOCAB, (1, 3))
    packed = torch.cat([first, second], dim=1)
    positions = torch.tensor([[0, 1, 2, 3, 0, 1, 2]])
    with torch.no_grad():
        logits = model(input_ids=packed, position_ids=positions, use_cache=False).logits
        torch.testing.assert_close(logits[:, :4], model(input_ids=first, use_cache=False).logits)
        torch.testing.assert_close(logits[:, 4:], model(input_ids=second, use_cache=False).logits)


def test_prefix_means_count_real_tokens_and_restart_at_packed_starts():
    states = torch.arange(12, dtype=torch.float64).view(1, 6, 2)
    mask = torch.tensor([[1, 0, 1, 1, 1, 1]])
    starts = torch.tensor([[False, False, False, False, True, False]])
    means, (total, count) = prefix_means(states, mask, None, starts)
    expected = torch.stack([states[0, 0], states[0, 0], (states[0, 0] + states[0, 2]) / 2,
                            (states[0, 0] + states[0, 2] + states[0, 3]) / 3, states[0, 4],
                            (states[0, 4] + states[0, 5]) / 2])  # fmt: skip
    torch.testing.assert_close(means[0], expected)
    torch.testing.assert_close(total[0], (states[0, 4] + states[0, 5]).float())
    assert count.item() == 2


@pytest.mark.parametrize("length", [4 * PREFIX_BLOCK - 1, 4 * PREFIX_BLOCK, 7 * PREFIX_BLOCK + 5])
def test_prefix_sums_in_blocks_are_cumsum_in_float32_under_autocast_with_its_gradient(length):
    """A long sequence's prefix sums on the CPU, summed in blocks (one product each), are cumsum's to float32's
    rounding, whatever the length (a part block at the end, or too short for blocks), stay float32 under a bfloat16
    autocast, and give cumsum's gradient."""
    values = torch.randn(2, length, 24, generator=torch.Generator().manual_seed(0), requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        sums = prefix_sums(values)
    assert sums.dtype == torch.float32 and sums.shape == values.shape
    torch.testing.assert_close(sums, values.cumsum(dim=1), rtol=1e-5, atol=1e-5)
    weights = torch.randn(sums.shape, generator=torch.Generator().manual_seed(1))
    (gradient,) = torch.autograd.grad((sums * weights).sum(), values)
    (expected,) = torch.autograd.grad((values.cumsum(dim=1) * weights).sum(), values)
    torch.testing.assert_close(gradient, expected, rtol=1e-5, atol=1e-5)


def test_a_long_prompt_summed_in_blocks_decodes_and_prefills_in_chunks_as_its_full_forward():
    """A prompt long enough for `prefix_sums`' blocks (left-padded, a part block at the end): a cached step's
    logits are a full forward's, and a prefill in chunks (whose sums start from the cache's) gives the unchunked
    logits."""
    model = trained_context("llama", "global", max_position_embeddings=128)
    ids = torch.randint(3, CAUSAL_VOCAB, (2, 5 * PREFIX_BLOCK + 3), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, :7] = 0
    step = torch.randint(3, CAUSAL_VOCAB, (2, 1), generator=torch.Generator().manual_seed(1))
    longer = torch.cat([mask, torch.ones_like(step)], dim=1)
    with torch.no_grad():
        cache = model(input_ids=ids, attention_mask=mask, use_cache=True).past_key_values
        cached = model(input_ids=step, attention_mask=longer, past_key_values=cache).logits
        full = model(input_ids=torch.cat([ids, step], dim=1), attention_mask=longer, use_cache=False).logits
        torch.testing.assert_close(cached, full[:, -1:], rtol=1e-5, atol=1e-5)
        generated = [
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=2, pad_token_id=0, do_sample=False,
                           prefill_chunk_size=chunk, output_logits=True, return_dict_in_generate=True).logits
            for chunk in (None, 4 * PREFIX_BLOCK + 1)
        ]  # fmt: skip
    for unchunked, chunked in zip(*generated, strict=True):
        torch.testing.assert_close(chunked, unchunked, rtol=1e-5, atol=1e-5)


def test_a_sliding_window_layer_s_context_spans_the_whole_prefix():
    """Qwen2's sliding-window layers attend to the last 2 tokens; their context is the prefix mean of every real token
    so far, not of the window (docs/FAMILIES.md): cached decoding past the window equals a full forward."""
    overrides = dict(use_sliding_window=True, sliding_window=2, max_window_layers=1)
    torch.manual_seed(0)
    model_class = casan_class("qwen2", "causal-lm")
    config = model_class.config_class(
        **tiny_causal_source_config("qwen2", **overrides).to_dict() | {"context_type": "global", "gate_bias_init": 0.0}
    )
    assert "sliding_attention" in config.layer_types
    model = model_class(config).eval()
    captured = {}
    layer = model.model.layers[2].self_attn.q_proj
    layer.register_forward_hook(lambda module, args, output: captured.update(states=args[0]))
    ids = torch.randint(3, CAUSAL_VOCAB, (1, 6))
    with torch.no_grad():
        model(input_ids=ids, use_cache=False)
        run_means, _ = prefix_means(captured["states"], torch.ones(1, 6), None, None)
        expected = captured["states"].cumsum(1) / torch.arange(1, 7).view(1, 6, 1)
    torch.testing.assert_close(run_means, expected)
    model.generation_config = GenerationConfig(pad_token_id=0)
    settings = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(model.generate(ids, **settings), model.generate(ids, use_cache=False, **settings))


LOAD_AND_GENERATE = """
import json, torch, transformers
cases = json.load(open("cases.json"))
for case in cases:
    model = transformers.AutoModelForCausalLM.from_pretrained(case["folder"], trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
    ids = torch.tensor(case["ids"])
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    tokens = model.generate(input_ids=ids, max_new_tokens=5, do_sample=False, pad_token_id=0)
    torch.save({"weights": model.state_dict(), "logits": logits, "tokens": tokens}, case["loaded"])
generator = transformers.pipeline("text-generation", model=cases[0]["folder"], trust_remote_code=True)
text = generator("the film was", max_new_tokens=3, do_sample=False)[0]["generated_text"]
assert text.startswith("the film was"), text
print(type(generator.model).__name__, len(cases))
"""


def test_saved_folders_load_and_generate_in_a_fresh_process_without_casan_hf(tmp_path):
    """Every causal family's language model, saved, loads with `AutoModelForCausalLM` and `pipeline("text-generation")`
    and `trust_remote_code=True` where casan_hf cannot be imported: the same weights, logits and greedy tokens."""
    cases, models = [], {}
    ids = [[5, 9, 11, 7]]
    for family in FAMILY_NAMES:
        model = trained_context(family, "deep_global", context_rank=4)
        folder = tmp_path / family
        model.save_pretrained(folder)
        if family == FAMILY_NAMES[0]:  # the pipeline's
            tiny_tokenizer(folder, token_types=False)
        models[family] = model
        cases.append({"folder": str(folder), "ids": ids, "loaded": str(folder / "loaded.pt")})
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    output = run_without_casan_hf(LOAD_AND_GENERATE, tmp_path)
    assert output.strip().splitlines()[-1] == f"CasanLlamaForCausalLM {len(cases)}"
    for family, case in zip(FAMILY_NAMES, cases, strict=True):
        model, loaded = models[family], torch.load(case["loaded"])
        for name, tensor in model.state_dict().items():
            assert torch.equal(loaded["weights"][name], tensor), name
        with torch.no_grad():
            torch.testing.assert_close(loaded["logits"], model(input_ids=torch.tensor(ids)).logits)
        expected = model.generate(input_ids=torch.tensor(ids), max_new_tokens=5, do_sample=False, pad_token_id=0)
        assert torch.equal(loaded["tokens"], expected), family


def test_the_converter_writes_a_causal_folder_that_loads_and_gives_the_source_logits(tmp_path, capsys):
    """scripts/convert_bert_to_casan.py on a Llama checkpoint with its tokenizer: a Hub folder whose card is a causal
    LM's, which passes the push's checks, loads with `AutoModelForCausalLM` and gives the source's logits; an
    encoder's option, and a checkpoint saved without its tokenizer, are refused in one line."""
    source = saved_source("llama", tmp_path / "llama")
    tiny_tokenizer(tmp_path / "llama", token_types=False)
    command = [sys.executable, "scripts/convert_bert_to_casan.py", "--model_name_or_path", str(tmp_path / "llama")]
    subprocess.run([*command, "--output_dir", str(tmp_path / "out"), "--head", "causal-lm", "--context_type",
                    "deep_global", "--context_rank", "4", "--model_name", "you/casan-llama", "--base_model",
                    "meta-llama/Llama-3.2-1B"], check=True, capture_output=True)  # fmt: skip
    # every check of the push, the load without casan_hf included, up to the Hub's own validation
    assert "model.safetensors" in check_folder(tmp_path / "out", "you/casan-llama")
    card = (tmp_path / "out" / "README.md").read_text()
    assert "pipeline_tag: text-generation" in card
    assert f"transformers` ({MINIMUM_TRANSFORMERS_CAUSAL} or later)" in card
    assert "scaled by exactly 0" in card and "BERT" not in card.split("## Citation")[0]
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    ids = torch.tensor([[5, 9, 11, 7]])
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, source(input_ids=ids).logits)
    # the refusals in this process: the same main(), without a second start-up to pay
    convert = load_script("convert_bert_to_casan").main
    with pytest.raises(SystemExit) as exit:
        convert([*command[2:], "--output_dir", str(tmp_path / "refused"), "--head", "sequence-classification",
                 "--classifier_pooling", "mean"])  # fmt: skip
    assert exit.value.code == 2 and "`classifier_pooling` is an encoder's option" in capsys.readouterr().err
    assert not (tmp_path / "refused").exists()
    saved_source("llama", tmp_path / "untokenized")  # a checkpoint saved without its tokenizer
    with pytest.raises(SystemExit) as exit:
        convert([*command[2:-1], str(tmp_path / "untokenized"), "--output_dir", str(tmp_path / "refused")])
    assert exit.value.code == 2 and capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "holds no tokenizer (none of tokenizer_config.json, tokenizer.json), and the folder needs one: save the "
        "source model's tokenizer into it (tokenizer.save_pretrained) and convert again."
    )
    assert not (tmp_path / "refused").exists()


# LoRA on a causal LM (docs/FAMILIES.md, "Causal language models"): the context is new, so its mixers train in full
# beside the adapters; the query and key projections hold the mixers, and PEFT puts no adapter over a module with a
# part trained in full, so the adapters sit on the value and output projections and the MLP.
CAUSAL_LORA = dict(
    task_type="CAUSAL_LM",
    target_modules=["v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    modules_to_save=["context_mixer"],
)
RELOAD_ADAPTER = """
import torch
from peft import AutoPeftModelForCausalLM
model = AutoPeftModelForCausalLM.from_pretrained("adapter", trust_remote_code=True).eval()
with torch.no_grad():
    torch.save(model(input_ids=torch.tensor([[5, 9, 11, 7, 3]])).logits, "logits.pt")
print(type(model.get_base_model()).__module__.split(".")[0])
"""


def test_a_lora_adapter_of_a_causal_lm_reloads_in_a_fresh_process_and_merges(tmp_path):
    """An adapter (with the context mixers trained in full) of a saved converted Llama: `AutoPeftModelForCausalLM`
    reloads it without casan_hf, with the same logits; merged, it gives them too, and cached generation still equals
    full forwards."""
    from peft import get_peft_model

    saved_source("llama", tmp_path / "llama")
    model_class = casan_class("llama", "causal-lm")
    model_class.from_pretrained(tmp_path / "llama", context_type="deep_global").save_pretrained(tmp_path / "casan")
    peft_model = get_peft_model(model_class.from_pretrained(tmp_path / "casan"), transformers_lora(CAUSAL_LORA))
    trainable = {name for name, parameter in peft_model.named_parameters() if parameter.requires_grad}
    assert any(".v_proj.lora_A" in name for name in trainable)
    assert any("context_mixer" in name and name.endswith("context_scale") for name in trainable)
    torch.manual_seed(1)
    with torch.no_grad():  # stands in for training: every trainable weight moves
        for parameter in peft_model.parameters():
            if parameter.requires_grad:
                parameter.add_(0.1 * torch.randn_like(parameter))
    peft_model.eval()
    ids = torch.tensor([[5, 9, 11, 7, 3]])
    with torch.no_grad():
        expected = peft_model(input_ids=ids).logits
    peft_model.save_pretrained(tmp_path / "adapter")
    assert run_without_casan_hf(RELOAD_ADAPTER, tmp_path).split() == ["transformers_modules"]
    torch.testing.assert_close(torch.load(tmp_path / "logits.pt"), expected)
    merged = peft_model.merge_and_unload()
    assert type(merged) is model_class
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=ids).logits, expected, atol=1e-5, rtol=1e-5)
    settings = dict(max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert torch.equal(merged.generate(ids, **settings), merged.generate(ids, use_cache=False, **settings))


def transformers_lora(settings):
    from peft import LoraConfig

    return LoraConfig(**settings)


@pytest.mark.parametrize("family", ["llama", "qwen3", "gpt2"])
def test_every_attention_implementation_of_the_class_gives_the_same_logits(family):
    """The context is mixed before the attention function, so eager, sdpa and flex_attention attend to the same mixed
    query and key: the real tokens' logits agree to float32 rounding on a left-padded batch."""
    ids, mask = left_padded_batch()
    model = trained_context(family, "deep_global")
    logits = {}
    for implementation in ("eager", "sdpa", "flex_attention"):
        model.set_attn_implementation(implementation)
        with torch.no_grad():
            logits[implementation] = model(input_ids=ids, attention_mask=mask).logits[mask.bool()]
    for implementation in ("sdpa", "flex_attention"):
        torch.testing.assert_close(logits[implementation], logits["eager"], rtol=1e-5, atol=1e-5)


def test_a_causal_lm_compiles_to_one_graph_with_the_eager_logits():
    """The forward's context (the base model's hook, the `CausalContextRun` its projections read) traces into one
    graph, no break, where the gates are not asked for; the compiled model gives the eager logits, and the eager
    gates where they are."""
    ids, mask = left_padded_batch()
    model = trained_context("llama", "deep_global")
    inputs = dict(input_ids=ids, attention_mask=mask, use_cache=False)
    with torch.no_grad():
        expected = model(**inputs, output_context_gates=True)
        explained = torch._dynamo.explain(model)(**inputs)
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
        compiled = torch.compile(model)
        torch.testing.assert_close(compiled(**inputs).logits, expected.logits, rtol=1e-5, atol=1e-5)
        gates = compiled(**inputs, output_context_gates=True).context_gates
    torch.testing.assert_close(gates, expected.context_gates, rtol=1e-5, atol=1e-5)


def test_transformers_4_refuses_a_causal_folder_with_the_minimum_version(tmp_path):
    """A causal folder needs transformers 5.4 (its cache layers and masks, and configs declared as dataclasses): on
    4.56 it stops at the config, naming the minimum, as a ModernBERT folder does."""
    from test_modernbert import TOO_OLD
    from test_transformers4 import python_4x

    python = python_4x()
    trained_context("qwen3", "global").save_pretrained(tmp_path / "model")
    message = run_without_casan_hf(TOO_OLD, tmp_path, python=python)
    assert f"CASAN causal language models need transformers >= {MINIMUM_TRANSFORMERS_CAUSAL} (found 4.56" in message


# Concurrency, packing, chunked prefill: what a server, a trainer of packed batches and generate() do to one model.
KINDS = ["none", *CONTEXTS]


def random_padded_rows(seed):
    """Two rows of a length and padding side of `seed`'s own: a forward whose run differs from its neighbours'."""
    generator = torch.Generator().manual_seed(seed)
    length = 3 + seed % 4
    ids = torch.randint(3, CAUSAL_VOCAB, (2, length + 2), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, :2] = 0 if seed % 2 else 1  # left padding on odd seeds
    mask[1, -2:] = 0 if seed % 2 == 0 else 1  # right padding on even ones
    return ids.masked_fill(mask == 0, 0), mask


def run_together(function, arguments):
    """`function(argument)` for each argument, each in a thread of its own, started together."""
    results, errors = [None] * len(arguments), []

    def run(index):
        try:
            results[index] = function(arguments[index])
        except Exception as error:  # re-raised in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(arguments))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def hold_threads_in_the_second_layer(model, parties):
    """A barrier for `parties` threads before the second layer's attention of `model`; its hook's handle."""
    barrier = threading.Barrier(parties, timeout=60)
    attention = type(model).attention_modules(model.base_model)[1]

    def wait(module, args):
        barrier.wait()

    return attention.register_forward_pre_hook(wait)


@pytest.mark.parametrize("family", FAMILY_NAMES)
@pytest.mark.parametrize("context", KINDS)
def test_threads_run_one_model_at_once(family, context):
    """Eight threads, each a batch of its own length and padding, all inside one model's forward together (and a
    `DataParallel` replica, which shares the model's modules): each gets the logits and gates of its forward alone."""
    model = (
        trained_context(family, context)
        if context != "none"
        else casan_class(family, "causal-lm")(tiny_causal_config(family)).eval()
    )
    batches = [random_padded_rows(seed) for seed in range(8)]
    replica = model._replicate_for_data_parallel()
    gates = context != "none"

    def forward(index):
        ids, mask = batches[index]
        with torch.no_grad():
            output = (replica if index == 7 else model)(input_ids=ids, attention_mask=mask, output_context_gates=gates)
        return output.logits, getattr(output, "context_gates", None)

    alone = [forward(index) for index in range(8)]
    handle = hold_threads_in_the_second_layer(model, 8)
    try:
        together = run_together(forward, list(range(8)))
    finally:
        handle.remove()
    for (logits, layer_gates), (expected_logits, expected_gates) in zip(together, alone, strict=True):
        assert torch.equal(logits, expected_logits)
        assert (layer_gates is None and expected_gates is None) or all(map(torch.equal, layer_gates, expected_gates))


def test_generate_from_threads_gives_the_tokens_of_generate_one_after_another():
    """Greedy generate() of six padded prompts from six threads at once on one model: each thread's tokens are those
    the same call gives alone."""
    model = trained_context("llama", "global")
    prompts = [random_padded_rows(seed) for seed in range(6)]

    def generate(prompt):
        ids, mask = prompt
        return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8, pad_token_id=0, do_sample=False)

    one_after_another = [generate(prompt) for prompt in prompts]
    assert all(map(torch.equal, run_together(generate, prompts), one_after_another))


def varlen_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Attention as flash-attention's variable-length path computes it, on the CPU: the batch's tokens flattened and
    cut into sequences by `cu_seq_lens_q` (or, without it, where the position ids restart), each attending causally
    to its own tokens only; the 4D mask transformers builds is not read, as flash-attention reads none."""
    batch, _, length, _ = query.shape
    sequence = torch.zeros(batch * length, dtype=torch.long)
    if kwargs.get("cu_seq_lens_q") is not None:
        sequence[kwargs["cu_seq_lens_q"][1:-1]] = 1
    else:
        sequence = (kwargs["position_ids"].expand(batch, -1) == 0).reshape(-1).long()
    sequence = sequence.cumsum(0).view(batch, length)
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    allowed = (sequence[:, :, None] == sequence[:, None, :]) & causal
    output = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=allowed[:, None], scale=scaling, enable_gqa=True
    )
    return output.transpose(1, 2).contiguous(), None


@pytest.mark.parametrize("family", ["llama", "gpt2"])
@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("flash_kwargs", [False, True], ids=["position_ids", "cu_seq_lens"])
def test_packed_sequences_from_either_collator_give_each_sequence_s_logits_and_loss(family, context, flash_kwargs):
    """`DataCollatorWithFlattening` with position ids (its default) or with flash-attention's `cu_seq_lens_q/k` and no
    position ids, through an attention function that masks as the variable-length path does: each packed
    sequence's logits and loss are those of its own forward. GPT-2 learns absolute positions, so its sequences are
    packed with their position ids even where the collator gives none."""
    transformers.AttentionInterface.register("casan_test_varlen", varlen_attention)
    model = trained_context(family, context, initializer_range=0.2)
    model.set_attn_implementation("casan_test_varlen")
    sequences = [[5, 9, 11, 7], [8, 4, 6], [3, 12, 10, 14, 6]]
    collator = transformers.DataCollatorWithFlattening(
        return_flash_attn_kwargs=flash_kwargs, return_position_ids=not flash_kwargs or family == "gpt2"
    )
    packed = collator([{"input_ids": sequence} for sequence in sequences], return_tensors="pt")
    assert ("cu_seq_lens_q" in packed) == flash_kwargs
    with torch.no_grad():
        logits = model(**packed, use_cache=False).logits[0]
        start = 0
        for sequence in sequences:
            ids = torch.tensor([sequence])
            alone = model(input_ids=ids, labels=ids, use_cache=False)
            torch.testing.assert_close(logits[start : start + len(sequence)], alone.logits[0], rtol=1e-5, atol=1e-5)
            start += len(sequence)
        # the loss of the packed batch: every sequence's tokens after its first, as the collator labels them
        losses = [
            model(input_ids=torch.tensor([s]), labels=torch.tensor([s]), use_cache=False).loss for s in sequences
        ]
        counts = [len(sequence) - 1 for sequence in sequences]
        expected = sum(loss * count for loss, count in zip(losses, counts, strict=True)) / sum(counts)
        torch.testing.assert_close(model(**packed, use_cache=False).loss, expected, rtol=1e-5, atol=1e-6)


def test_packed_sequences_continue_no_cache_and_left_padding_starts_none():
    """Position ids or cu_seq_lens that restart after real tokens, with a cache holding tokens, are refused by name;
    a left-padded row's first real token restarts nothing, so a chunk that begins a row continues its cache."""
    model = trained_context("llama", "global")
    ids, mask = left_padded_batch()
    cache = model(input_ids=ids, attention_mask=mask).past_key_values
    more = torch.tensor([[4, 5], [6, 7]])
    with pytest.raises(ValueError, match="Packed sequences .* continue no cache: the cache holds 5 tokens"):
        model(input_ids=more, position_ids=torch.tensor([[5, 0], [3, 0]]), past_key_values=cache)
    with pytest.raises(ValueError, match="cu_seq_lens_q and cu_seq_lens_k differ"):
        model(input_ids=more[:1], cu_seq_lens_q=torch.tensor([0, 2]), cu_seq_lens_k=torch.tensor([0, 7]))


@pytest.mark.parametrize("context", KINDS)
@pytest.mark.parametrize("padding_side", ["left", "right"])
def test_chunked_prefill_gives_the_unchunked_tokens_and_logits(context, padding_side):
    """generate(prefill_chunk_size=2) on a padded batch: the tokens and every step's logits of the unchunked prefill,
    for every kind (left padding's position ids restart inside a later chunk, and nothing is packed)."""
    model = (
        trained_context("llama", context)
        if context != "none"
        else casan_class("llama", "causal-lm")(tiny_causal_config("llama")).eval()
    )
    ids, mask = left_padded_batch()
    if padding_side == "right":
        ids, mask = torch.tensor([[5, 9, 11, 7, 3], [8, 4, 6, 0, 0]]), torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    outputs = [
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=4, pad_token_id=0, do_sample=False,
                       prefill_chunk_size=chunk, output_logits=True, return_dict_in_generate=True)
        for chunk in (None, 2)
    ]  # fmt: skip
    assert torch.equal(outputs[0].sequences, outputs[1].sequences)
    for unchunked, chunked in zip(outputs[0].logits, outputs[1].logits, strict=True):
        torch.testing.assert_close(chunked, unchunked, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "options",
    [dict(cache_implementation="static"), dict(prefill_chunk_size=2), dict(prompt_lookup_num_tokens=2), dict()],
    ids=["static", "chunked", "assisted", "user-dynamic-cache"],
)
def test_none_takes_every_cache_and_generation_option_of_its_source_and_equals_it(options, tmp_path):
    """`context_type="none"` is the source model: a static cache, chunked prefill, prompt-lookup (assisted) decoding,
    which crops its cache, and a plain `DynamicCache` handed in give the source's tokens and logits."""
    source = saved_source("llama", tmp_path / "llama")
    model = casan_class("llama", "causal-lm").from_pretrained(tmp_path / "llama", context_type="none").eval()
    ids, mask = left_padded_batch()
    if "prompt_lookup_num_tokens" in options:  # transformers' assisted decoding takes one sequence at a time
        ids, mask = ids[:1], mask[:1]
    generated = []
    for candidate in (source, model):
        given = dict(options) or dict(past_key_values=DynamicCache(config=candidate.config))
        generated.append(
            candidate.generate(input_ids=ids, attention_mask=mask, max_new_tokens=4, pad_token_id=0, do_sample=False,
                               output_logits=True, return_dict_in_generate=True, **given)
        )  # fmt: skip
    assert torch.equal(generated[0].sequences, generated[1].sequences)
    for expected, logits in zip(generated[0].logits, generated[1].logits, strict=True):
        assert torch.equal(logits, expected)


def test_a_deep_kind_that_gives_no_layer_a_context_is_refused_by_name():
    with pytest.raises(ValueError, match="context_type='deep' gives no layer of this 1-layer model a context"):
        tiny_causal_config("llama", context_type="deep", num_hidden_layers=1).check_context_options()
    with pytest.raises(ValueError, match="gives no layer of this 1-layer model a context"):
        casan_class("gpt2", "causal-lm")(tiny_causal_config("gpt2", context_type="deep", n_layer=1))


@pytest.mark.parametrize("family", ["llama", "bert"])
def test_a_mistyped_kind_at_conversion_is_the_config_s_own_error(family, tmp_path):
    """`from_pretrained(source, context_type="globl")` names the allowed kinds, from a causal and an encoder source."""
    if family == "bert":
        transformers.BertModel(tiny_source_config("bert")).save_pretrained(tmp_path / family)
        head = "base"
    else:
        saved_source(family, tmp_path / family)
        head = "causal-lm"
    with pytest.raises(
        ValueError, match="`context_type` must be one of 'global', 'deep', 'deep_global', 'none'; got 'globl'"
    ):
        casan_class(family, head).from_pretrained(tmp_path / family, context_type="globl")


def test_a_causal_model_built_as_a_decoder_builds_and_loads(tmp_path):
    """`is_decoder=True`, which transformers' own generation tests set, is what a causal LM is: it builds, saves and
    loads; cross-attention, which it has none of, is refused by name."""
    config = tiny_causal_config("llama", context_type="global", is_decoder=True)
    model = casan_class("llama", "causal-lm")(config)
    model.save_pretrained(tmp_path / "decoder")
    assert type(model).from_pretrained(tmp_path / "decoder").config.is_decoder
    with pytest.raises(ValueError, match="attend to their own tokens only: `add_cross_attention` must be False"):
        casan_class("gpt2", "causal-lm")(tiny_causal_config("gpt2", add_cross_attention=True))


def decode_greedily(model, step, prompt, tokens, after_step=lambda: None):
    """`tokens` tokens decoded greedily after `prompt`'s prefill by `model`, each step by `step` (the model or its
    compiled twin): the tokens, and what `after_step()` returned after each step."""
    generated, seen = [], []
    with torch.no_grad():
        output = model(input_ids=prompt, use_cache=True)
        for _ in range(tokens):
            token = output.logits[:, -1:].argmax(-1)
            generated.append(token)
            output = step(input_ids=token, past_key_values=output.past_key_values, use_cache=True)
            seen.append(after_step())
    return torch.cat(generated, dim=1), seen


@pytest.mark.parametrize("context", [None, "global", "deep_global"])
def test_compiled_decoding_makes_one_graph_and_never_recompiles(context):
    """A decoding step compiled with dynamic shapes (dynamo's graphs, run by its eager backend) is one graph, no
    break, with the CASAN cache as with Llama's own (`context` None), and the 64 steps of a generation reuse it: the
    cache's growing length compiles nothing again. The tokens are those of eager greedy decoding."""
    from torch._dynamo.utils import counters

    if context is None:
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(tiny_causal_source_config("llama", max_position_embeddings=128)).eval()
    else:
        model = trained_context("llama", context, max_position_embeddings=128)
    prompt = torch.randint(3, CAUSAL_VOCAB, (1, 5), generator=torch.Generator().manual_seed(0))
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, dynamic=True, backend="eager")

    def graphs_and_breaks():
        return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())

    tokens, graphs = decode_greedily(model, compiled, prompt, 64, graphs_and_breaks)
    assert graphs == [(1, 0)] * 64
    assert torch.equal(tokens, decode_greedily(model, model, prompt, 64)[0])
