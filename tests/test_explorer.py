"""The explorer's views on tiny models: each shows the model's own numbers (gates, attention, hops, their
difference), a submission runs each model once and switching the layer or head runs none, bad checkpoints and
texts are messages; the Space folder that scripts/explore.py writes runs its own copy of the package; the demo's
pins agree with constraints.txt."""

import json
import re
import subprocess
from html.parser import HTMLParser

import pytest
import torch
from conftest import REPO_ROOT, load_script
from tiny_models import TINY, tiny_config
from tiny_tokenizer import tiny_tokenizer
from transformers import BertConfig, BertModel, GPT2Config

from casan_hf import CasanForSequenceClassification, CasanModel, casan_class
from casan_hf.explorer.views import (
    ModelCache,
    attention_views,
    gates_html,
    hops_html,
    load_checkpoint,
    page,
    submit,
)
from casan_hf.inspection import MAX_TOKENS


TEXT, PAIR = "The film was gripping, funny and not at all dull!", "I liked it."
DEMO_PYTHON = REPO_ROOT / ".venv-demo" / "bin" / "python"
explore_script = load_script("explore")  # its arguments are checked before Gradio is imported


class Cells(HTMLParser):
    """The cells of an HTML view: (table index, row label, data-value or None for a grey cell)."""

    def __init__(self, text):
        super().__init__()
        self.tables, self.cells, self.row_label, self.in_row_label = -1, [], None, False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables += 1
        elif tag == "th":
            self.in_row_label = True
        elif tag == "td":
            value = attrs.get("data-value")
            self.cells.append((self.tables, self.row_label, None if value is None else float(value)))

    def handle_endtag(self, tag):
        if tag == "th":
            self.in_row_label = False

    def handle_data(self, data):
        if self.in_row_label:
            self.row_label = data

    def values(self, table=0):
        return [value for index, _, value in self.cells if index == table]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return tiny_tokenizer(tmp_path_factory.mktemp("tokenizer"))


class CountingCache(ModelCache):
    """A cache over models in memory, which counts each model's forward passes."""

    def __init__(self, models, tokenizer):
        super().__init__(load=lambda name: (models[name], tokenizer))
        self.forwards = {name: 0 for name in models}
        for name, model in models.items():
            model.eval().register_forward_hook(
                lambda *_, name=name: self.forwards.__setitem__(name, self.forwards[name] + 1)
            )


def cache_of(tokenizer, **models):
    return CountingCache(models, tokenizer)


@pytest.mark.parametrize("family", ["bert", "modernbert"])
def test_gates_view_shows_every_gate_and_greys_the_layers_without_context(tokenizer, family, tmp_path):
    torch.manual_seed(0)
    model = casan_class(family, "base")(tiny_config(family, context_type="global", context_layers=[1]))
    if not model.has_token_types:
        tokenizer = tiny_tokenizer(tmp_path, token_types=False)
    cache = cache_of(tokenizer, casan=model)
    (exploration,) = submit(cache, "casan", "", TEXT, PAIR)
    inspection, layers = exploration.inspection, TINY["num_hidden_layers"]
    cells = Cells(gates_html(exploration)).cells
    assert len(cells) == len(inspection.tokens) * 2 * layers
    expected = []
    for token, query, key in zip(inspection.tokens, inspection.query_gates.T, inspection.key_gates.T, strict=True):
        gates = [*query.tolist(), *key.tolist()]
        expected += [
            (0, token, None if column % layers != 1 else pytest.approx(value, rel=1e-5))
            for column, value in enumerate(gates)
        ]
    assert cells == expected
    assert "grey: layers 0, 2 take no context" in gates_html(exploration)
    vmin, vmax = inspection.gate_range()
    assert f"scale {vmin:.3f} to {vmax:.3f}" in gates_html(exploration)


def test_a_submission_runs_each_model_once_and_switching_layer_or_head_runs_none(tokenizer):
    torch.manual_seed(0)
    cache = cache_of(tokenizer, casan=CasanModel(tiny_config()), bert=BertModel(BertConfig(**TINY)))
    explorations = submit(cache, "casan", "bert", TEXT, PAIR)
    assert cache.forwards == {"casan": 1, "bert": 1}
    casan, bert = explorations
    for layer in range(TINY["num_hidden_layers"]):
        for head in range(TINY["num_attention_heads"]):
            cells = Cells(attention_views(explorations, layer, head))
            first, second = (exploration.inspection.attentions[layer, head] for exploration in explorations)
            assert cells.values(0) == pytest.approx(first.flatten().tolist(), rel=1e-5)
            assert cells.values(1) == pytest.approx(second.flatten().tolist(), rel=1e-5)
            assert cells.values(2) == pytest.approx((first - second).flatten().tolist(), rel=1e-4, abs=1e-6)
    assert cache.forwards == {"casan": 1, "bert": 1}
    assert "no gates (BertModel has no context)" in page(explorations, 0, 0)["gates"]


def test_a_difference_needs_the_same_tokens_and_a_layer_in_both(tokenizer, tmp_path):
    torch.manual_seed(0)
    models = {"three": CasanModel(tiny_config()), "two": CasanModel(tiny_config(num_hidden_layers=2))}
    explorations = submit(cache_of(tokenizer, **models), "three", "two", TEXT, None)
    assert "No difference map: two has no layer 2, head 0." in attention_views(explorations, 2, 0)
    assert "two has 2 layers and 4 heads: no layer 2, head 0." in attention_views(explorations, 2, 0)
    other = tiny_tokenizer(tmp_path)
    other.add_tokens(["gripping,"])
    cache = ModelCache(load=lambda name: (models["three"], tokenizer if name == "a" else other))
    explorations = submit(cache, "a", "b", "gripping, funny", None)
    assert "the two checkpoints cut the text into different tokens" in attention_views(explorations, 0, 0)


def test_hops_view_shows_the_structured_pooling_hops(tokenizer):
    torch.manual_seed(0)
    model = CasanForSequenceClassification(tiny_config(classifier_pooling="structured", pooling_hops=3))
    (exploration,) = submit(cache_of(tokenizer, structured=model), "structured", "", TEXT, PAIR)
    hops = exploration.inspection.pooling_attentions
    assert Cells(hops_html(exploration)).values() == pytest.approx(hops.T.flatten().tolist(), rel=1e-5)
    assert "does not pool with attention" in hops_html(
        submit(cache_of(tokenizer, cls=CasanForSequenceClassification(tiny_config())), "cls", "", TEXT, None)[0]
    )


def test_a_deberta_v2_model_shows_its_gates_attention_and_hops(tokenizer):
    """DeBERTa's config is no CasanConfig: the gates and hops are found all the same, with its eager attention."""
    torch.manual_seed(0)
    config = tiny_config("deberta-v2", context_type="global", context_layers=[1], classifier_pooling="structured")
    model = casan_class("deberta-v2", "sequence-classification")(config)
    (exploration,) = submit(cache_of(tokenizer, deberta=model), "deberta", "", TEXT, PAIR)
    inspection = exploration.inspection
    assert inspection.layers_with_context == [False, True, False]
    gates = torch.stack([inspection.query_gates[1], inspection.key_gates[1]], dim=1).flatten().tolist()  # per token
    assert [value for value in Cells(gates_html(exploration)).values() if value is not None] == pytest.approx(
        gates, rel=1e-5
    )
    assert Cells(hops_html(exploration)).values() == pytest.approx(
        inspection.pooling_attentions.T.flatten().tolist(), rel=1e-5
    )
    cells = Cells(attention_views([exploration], 2, 3))
    assert cells.values(0) == pytest.approx(inspection.attentions[2, 3].flatten().tolist(), rel=1e-5)


def test_long_texts_are_cut_and_the_page_says_so(tokenizer):
    torch.manual_seed(0)
    long_text = " ".join(["the film was funny and gripping ,"] * 20)
    (exploration,) = submit(cache_of(tokenizer, casan=CasanModel(tiny_config())), "casan", "", long_text, None)
    assert len(exploration.inspection.tokens) == MAX_TOKENS
    assert f"The text had 142 tokens and was cut to {MAX_TOKENS}" in page([exploration], 0, 0)["status"]


def test_tokens_are_escaped(tokenizer):
    torch.manual_seed(0)
    (exploration,) = submit(cache_of(tokenizer, casan=CasanModel(tiny_config())), "casan", "", TEXT, None)
    exploration.inspection.tokens[1] = "<s>"
    views = page([exploration], 0, 0)
    assert "&lt;s&gt;" in views["gates"] and "<s>" not in views["gates"] and "<s>" not in views["attention"]


def test_bad_checkpoints_and_texts_are_messages(tmp_path, tokenizer):
    GPT2Config(n_layer=1, n_embd=8, n_head=2).save_pretrained(tmp_path / "gpt2")
    BertConfig(**TINY, architectures=["BertForPreTraining"]).save_pretrained(tmp_path / "pretraining")
    messages = {
        str(tmp_path / "missing"): "Cannot show '{}': ",
        str(tmp_path / "gpt2"): "Cannot show '{}': A gpt2 checkpoint is a causal language model, which the explorer "
        "does not show; scripts/plot_attention.py draws its gates and attention.",
        str(tmp_path / "pretraining"): "Cannot show '{}': Checkpoint architecture 'BertForPreTraining' is not a head",
        "": "Enter a checkpoint: a local folder or a Hub id.",
    }
    for name, message in messages.items():
        with pytest.raises(ValueError, match=re.escape(message.format(name))):
            load_checkpoint(name)
    cache = cache_of(tokenizer, casan=CasanModel(tiny_config()))
    with pytest.raises(ValueError, match="Enter a text."):
        submit(cache, "casan", "", "   ", PAIR)
    assert cache.forwards == {"casan": 0}


def test_the_cache_keeps_the_latest_submission_s_models_only():
    loads = []
    cache = ModelCache(load=lambda name: loads.append(name) or name)
    assert cache.get(["a", "b"]) == ["a", "b"] and cache.get(["a"]) == ["a"] and cache.get(["a", "b"]) == ["a", "b"]
    assert loads == ["a", "b", "b"]


def pins(path):
    lines = (line.split("==") for line in path.read_text().splitlines() if "==" in line and not line.startswith("#"))
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in lines}


def test_the_demo_pins_are_constraints_txt_s_but_pillow():
    main, demo = pins(REPO_ROOT / "constraints.txt"), pins(REPO_ROOT / "constraints-demo.txt")
    assert {name: (main[name], demo[name]) for name in main.keys() & demo.keys() if main[name] != demo[name]} == {
        "pillow": ("13.0.0", demo["pillow"])
    }
    assert "gradio" in demo and "gradio" not in main


def explore(*args, cwd=REPO_ROOT):
    if not DEMO_PYTHON.exists():
        pytest.fail(f"{DEMO_PYTHON} not found: `make install-demo` builds the explorer's environment.")
    return subprocess.run(
        [str(DEMO_PYTHON), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        # PYTHONPATH: this checkout's casan_hf, wherever the demo environment installed it from (a Space folder's own
        # copy still comes first in it, as the script's folder or the working folder does).
        env={
            "HF_HUB_OFFLINE": "1",
            "PATH": "/usr/bin:/bin",
            "GRADIO_ANALYTICS_ENABLED": "False",
            "PYTHONPATH": str(REPO_ROOT),
        },  # fmt: skip
        timeout=300,
    )


def test_space_folder_pins_what_was_tested_and_runs_its_own_copy_of_the_package(tmp_path):
    space = tmp_path / "space"
    result = explore(
        "scripts/explore.py", "--model", "user/casan-minilm", "--compare", "user/bert", "--space_dir", str(space)
    )
    assert result.returncode == 0, result.stderr
    demo = pins(REPO_ROOT / "constraints-demo.txt") | {"torch": "2.13.0"}
    requirements = pins(space / "requirements.txt")
    assert {"torch", "transformers", "safetensors", "matplotlib", "tokenizers"} <= requirements.keys()
    # Every pin is the demo environment's; setuptools (torch needs it) is the venv's own, which pip freeze leaves out.
    assert {name: version for name, version in requirements.items() if demo.get(name) != version} == {
        "setuptools": requirements["setuptools"]
    }
    readme = (space / "README.md").read_text()
    assert f"sdk: gradio\nsdk_version: {demo['gradio']}\n" in readme and "app_file: app.py" in readme
    assert "- user/casan-minilm\n- user/bert" in readme
    assert (
        "build_app(model='user/casan-minilm', compare='user/bert', fixed_checkpoints=True).launch()"
        in (space / "app.py").read_text()
    )
    check = (
        "import casan_hf, casan_hf.explorer.app as app, casan_hf.model_cards as cards; app.build_app(model='x'); "
        "print(casan_hf.__file__, cards.__file__)"
    )
    result = explore("-c", check, cwd=space)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(space / "casan_hf" / name / "__init__.py") for name in ("", "model_cards")]


# The checkpoint boxes of a page: whether a visitor can edit them, and whether a submission reads them.
CHECKPOINT_BOXES = """
import json
from casan_hf.explorer.app import build_app

config = build_app(model="user/a", compare="user/b", fixed_checkpoints={fixed}).config
components = {{component["id"]: component["props"] for component in config["components"]}}
read = {{components[i].get("elem_id") for dependency in config["dependencies"] for i in dependency["inputs"]}}
print(json.dumps({{box: [components[i]["interactive"] for i in components if components[i].get("elem_id") == box]
                  + [box in read] for box in ("model", "compare")}}))
"""


@pytest.mark.parametrize("fixed", [True, False])
def test_a_space_page_runs_only_its_checkpoints_and_the_local_explorer_any(fixed):
    """A Space's boxes show its models and no submission reads a checkpoint name from the page, so a visitor can
    load no other model and probe no path of the Space machine; the local explorer's boxes stay editable."""
    result = explore("-c", CHECKPOINT_BOXES.format(fixed=fixed), cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {box: [not fixed, not fixed] for box in ("model", "compare")}


@pytest.mark.parametrize(
    "args,message",
    [
        (["--model", "{folder}"], "--model '{folder}' is not a Hub id: a Space loads its model from the Hub"),
        (["--model", "user/a", "--compare", "{folder}"], "--compare '{folder}' is not a Hub id"),
        (["--model", "user/a", "--space_dir", "{folder}"], "pass --overwrite_space_dir to write into it anyway"),
        (["--model", "user/a", "--port", "0"], "--port must be in 1..65535; got 0."),
        # This environment has no Gradio: the Space's pins cannot be taken from it, and nothing is written.
        (["--model", "user/a"], "gradio is not installed: write the Space from the environment of casan-hf[demo]"),
    ],
)
def test_bad_space_arguments_are_usage_errors(tmp_path, capsys, args, message):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "mine.txt").write_text("kept")
    args = [arg.format(folder=folder) for arg in args]
    space = [] if "--space_dir" in args else ["--space_dir", str(tmp_path / "space")]
    with pytest.raises(SystemExit) as exit_info:
        explore_script.main([*args, *space])
    assert exit_info.value.code == 2 and message.format(folder=folder) in capsys.readouterr().err
    assert (folder / "mine.txt").read_text() == "kept" and not (tmp_path / "space").exists()


def test_the_attention_view_shows_the_local_bias_of_a_layer_that_adds_it(tokenizer):
    torch.manual_seed(0)
    local = CasanModel(tiny_config(context_type="none", local_bias="query", local_layers=[1])).eval()
    explorations = submit(cache_of(tokenizer, local=local), "local", "", TEXT, PAIR)
    with_bias = attention_views(explorations, 1, 2)
    assert "local bias of layer 1, head 2" in with_bias
    cells = Cells(with_bias)
    expected = explorations[0].inspection.local_weights(1, 2).flatten().tolist()
    assert cells.values(table=1) == pytest.approx(expected, rel=1e-5)
    assert "local bias" not in attention_views(explorations, 0, 2)
