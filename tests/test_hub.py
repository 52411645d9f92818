"""From the Hub, as users load it: checkpoints published on a Hub-protocol server (olah, tests/hub_server.py)
load by repo id in a fresh process without casan_hf, with transformers 5 and with transformers 4.x (.venv-4x):
every family's classifier and AutoModel, the masked-LM, token-classification and question-answering heads,
CasanMarianMTModel's generate(), a pipeline per task, the sentence-transformers folder, a PEFT adapter whose
base is another repo of the server, and the folders that `run_glue.py --push_to_hub` and `scripts/push_to_hub.py`
upload through the server's upload API (tests/olah_server.py) with `huggingface_hub`, whose commits are asserted
to hold exactly the upload's files. `revision=` pins weights and code, `code_revision=` the code alone. Each
environment's loads run in one process (tests/hub_loads.py); the tests read its results."""

import json
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from conftest import load_script
from fresh_process import run_without_casan_hf
from glue_helpers import TINY_RUN, make_tiny_bert
from huggingface_hub import ModelCard
from tiny_models import OUTPUT_TOLERANCE, padded_batch, tiny_config
from tiny_tokenizer import tiny_tokenizer
from transformers import pipeline

from casan_hf import FAMILIES, CasanMarianConfig, CasanMarianMTModel, casan_class
from casan_hf.cli.run_start import RUN_START_NAME
from casan_hf.hub.checks import upload_files


HUB_LOADS = (Path(__file__).with_name("hub_loads.py")).read_text()
SENTENCES = ["the film was funny and gripping .", "i liked it not at all !"]
CODE_MARKER = "# published again: only the code changed"
# LoRA on the attention projections; the context and the classifier are new, so they train in full.
LORA = dict(
    task_type="SEQ_CLS", target_modules=["query", "key", "value"], modules_to_save=["context_mixer", "classifier"]
)
ENVIRONMENTS = ("transformers-5", "transformers-4")


def family_environments(family):
    """The environments whose transformers loads the family's folders: transformers 4 only where the family asks for
    no newer release (ModernBERT's folders refuse 4.x, naming their minimum: tests/test_modernbert.py)."""
    return ENVIRONMENTS if not family.minimum_transformers else ("transformers-5",)


# The pipeline of each task a CASAN encoder head serves, with the environments that have it (transformers 5 has
# no question-answering pipeline). The translation model needs transformers 5, which has no translation pipeline.
PIPELINES = {
    "text-classification": ("casan/tiny-bert", SENTENCES, {}, ENVIRONMENTS),
    "feature-extraction": ("casan/tiny-bert", SENTENCES, {}, ENVIRONMENTS),
    "fill-mask": ("casan/tiny-bert-mlm", "the film was [MASK] .", {"top_k": 3}, ENVIRONMENTS),
    "token-classification": ("casan/tiny-bert-ner", SENTENCES[0], {}, ENVIRONMENTS),
    "question-answering": (
        "casan/tiny-bert-qa",
        {"question": "what was the film ?", "context": SENTENCES[0]},
        {},
        ("transformers-4",),
    ),
}
HEAD_REPOS = {  # repo: (head, auto class, output compared)
    "casan/tiny-bert-mlm": ("masked-lm", "AutoModelForMaskedLM", "logits"),
    "casan/tiny-bert-ner": ("token-classification", "AutoModelForTokenClassification", "logits"),
    "casan/tiny-bert-qa": ("question-answering", "AutoModelForQuestionAnswering", "start_logits"),
}


@contextmanager
def uploading_to(server):
    """This process as a client of the server's upload API: huggingface_hub online, against the server."""
    import huggingface_hub.constants

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(huggingface_hub.constants, "ENDPOINT", server.url)
        patch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
        yield patch


def outputs_of(model, inputs, output):
    with torch.no_grad():
        return model.eval()(**inputs)[output]


class Publisher:
    """Builds the checkpoints locally, publishes them on the server and keeps what each must give."""

    def __init__(self, server, root):
        self.server, self.root = server, Path(root)
        self.expected, self.checks, self.commits = {}, [], {}

    def folder(self, name):
        return self.root / name.replace("/", "--")

    def check(self, name, kind, expected=None, environments=ENVIRONMENTS, **kwargs):
        self.checks.append({"name": name, "kind": kind, "environments": environments, **kwargs})
        self.expected[name] = expected

    def inputs_path(self, repo):
        return str(self.root / f"{repo.replace('/', '--')}-inputs.pt")

    def save_inputs(self, repo, inputs):
        torch.save(inputs, self.inputs_path(repo))
        return self.inputs_path(repo)

    def tokenizer(self, name):
        return tiny_tokenizer(self.folder(name))

    def families(self):
        """Each family's classifier, loaded by its auto class and by AutoModel (the encoder of the same repo)."""
        for index, family in enumerate(FAMILIES):
            repo = f"casan/tiny-{family.name}"
            folder = self.folder(repo)
            folder.mkdir()
            vocab = len(self.tokenizer(repo)) if family.name == "bert" else 99
            torch.manual_seed(index)
            config = tiny_config(family.name, context_type="deep_global", num_labels=2, gate_bias_init=0.0)
            config.vocab_size = vocab
            config.id2label, config.label2id = {0: "negative", 1: "positive"}, {"negative": 0, "positive": 1}
            model = casan_class(family.name, "sequence-classification")(config)
            model.save_pretrained(folder)
            input_ids, attention_mask = padded_batch([6, 3], vocab_size=vocab, pad_token_id=config.pad_token_id)
            inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
            path = self.save_inputs(repo, inputs)
            self.commits[repo] = [self.server.publish_folder(repo, folder)]
            encoder = casan_class(family.name, "base").from_pretrained(folder)
            for load, auto_class, loaded, output in (
                ("classifier", "AutoModelForSequenceClassification", model, "logits"),
                ("AutoModel", "AutoModel", encoder, "last_hidden_state"),
            ):
                expected = outputs_of(loaded, inputs, output)
                self.check(f"{repo}:{load}", "auto_model", expected, repo=repo, auto_class=auto_class, output=output,
                           inputs=path, environments=family_environments(family))  # fmt: skip

    def revisions(self):
        """casan/tiny-bert again: a second commit with a changed classifier bias, a third with changed code."""
        repo = "casan/tiny-bert"
        folder = self.folder(repo)
        model_class = casan_class("bert", "sequence-classification")
        model = model_class.from_pretrained(folder)
        path = self.inputs_path(repo)  # the inputs of the family check
        inputs = torch.load(path)
        first = outputs_of(model, inputs, "logits")
        with torch.no_grad():
            model.classifier.bias[0] += 1.0
        model.save_pretrained(folder)
        self.commits[repo].append(self.server.publish_folder(repo, folder, "A changed classifier bias"))
        second = outputs_of(model, inputs, "logits")
        assert not torch.equal(first, second)
        with open(folder / "modeling_casan.py", "a") as handle:
            handle.write(f"\n{CODE_MARKER}\n")
        self.commits[repo].append(self.server.publish_folder(repo, folder, "The code again"))
        first_commit = self.commits[repo][0]
        self.expected[f"{repo}:classifier"] = second  # main: the last weights
        common = dict(repo=repo, auto_class="AutoModelForSequenceClassification", output="logits", inputs=path)
        self.check(f"{repo}:pinned", "auto_model", first, revision=first_commit, **common)
        self.check(f"{repo}:code_pinned", "auto_model", second, code_revision=first_commit, **common)

    def heads(self):
        for index, (repo, (head, auto_class, output)) in enumerate(HEAD_REPOS.items()):
            folder = self.folder(repo)
            folder.mkdir()
            vocab = len(self.tokenizer(repo))
            torch.manual_seed(10 + index)
            labels = {"id2label": {0: "O", 1: "B-FILM", 2: "I-FILM"}} if head == "token-classification" else {}
            config = tiny_config("bert", context_type="global", gate_bias_init=0.0, vocab_size=vocab, **labels)
            model = casan_class("bert", head)(config)
            model.save_pretrained(folder)
            input_ids, attention_mask = padded_batch([6, 3], vocab_size=vocab)
            inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
            self.server.publish_folder(repo, folder)
            self.check(
                f"{repo}:{auto_class}",
                "auto_model",
                outputs_of(model, inputs, output),
                repo=repo,
                auto_class=auto_class,
                output=output,
                inputs=self.save_inputs(repo, inputs),
            )

    def marian(self):
        from casan_hf.translation import model_config_kwargs, train_tokenizer

        repo = "casan/tiny-marian"
        folder = self.folder(repo)
        pairs = [{"en": sentence, "de": sentence.upper()} for sentence in SENTENCES * 3]
        tokenizer = train_tokenizer({"train": {"translation": pairs}}, "en", "de", 60, 64)
        torch.manual_seed(20)
        kwargs = model_config_kwargs("tiny", tokenizer, 64, d_model=32, layers=2, ffn_dim=37)
        model = CasanMarianMTModel(CasanMarianConfig(**kwargs, context_type="deep", gate_bias_init=0.0)).eval()
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        self.server.publish_folder(repo, folder)
        batch = tokenizer(SENTENCES, return_tensors="pt", padding=True)
        # The folder loaded here, as the server's copy of it is loaded: the same weights read in place from the same
        # file, the same arithmetic, so the same tokens (a rounding step could flip a near tie between two).
        generated = CasanMarianMTModel.from_pretrained(folder).eval().generate(**batch, num_beams=2, max_new_tokens=6)
        self.check(f"{repo}:generate", "generate", generated, repo=repo, sentences=SENTENCES)

    def pipelines(self):
        for task, (repo, inputs, call_kwargs, environments) in PIPELINES.items():
            expected = None
            if "transformers-5" in environments:
                run = pipeline(task, model=str(self.folder(repo)))
                result = run(**inputs, **call_kwargs) if isinstance(inputs, dict) else run(inputs, **call_kwargs)
                expected = json.loads(json.dumps(result, default=float))
            self.check(f"pipeline:{task}", "pipeline", expected, environments, repo=repo, task=task, inputs=inputs,
                       **call_kwargs)  # fmt: skip

    def sentence_transformers(self):
        """A sentence-transformers source (BERT, mean pooling, normalisation) on the server, converted by
        scripts/convert_bert_to_casan.py --sentence_transformers and published."""
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

        source_repo, repo = "casan/tiny-st-source", "casan/tiny-st"
        bert = self.folder("bert-for-st")
        make_tiny_bert(bert, str(self.folder("casan/tiny-bert")))
        source = self.folder(source_repo)
        encoder = Transformer(str(bert))
        modules = [encoder, Pooling(encoder.get_embedding_dimension(), "mean"), Normalize()]
        SentenceTransformer(modules=modules, device="cpu").save(str(source))
        self.server.publish_folder(source_repo, source)
        torch.manual_seed(30)
        load_script("convert_bert_to_casan").main(
            ["--model_name_or_path", str(source), "--output_dir", str(self.folder(repo)), "--context_type", "deep",
             "--sentence_transformers", "--base_model", source_repo, "--model_name", repo]
        )  # fmt: skip
        self.server.publish_folder(repo, self.folder(repo))
        local = SentenceTransformer(str(self.folder(repo)), device="cpu", trust_remote_code=True)
        embeddings = local.encode(SENTENCES, convert_to_tensor=True)
        self.check(f"{repo}:encode", "sentence_transformer", embeddings, ("transformers-5",), repo=repo,
                   sentences=SENTENCES)  # fmt: skip
        self.check(f"{repo}:card", "model_card", ModelCard.load(self.folder(repo) / "README.md"), repo=repo)

    def peft_adapter(self):
        """A LoRA adapter of casan/tiny-bert (its main weights), named by repo id as its base."""
        from peft import LoraConfig, get_peft_model

        base_repo, repo = "casan/tiny-bert", "casan/tiny-bert-lora"
        base = casan_class("bert", "sequence-classification").from_pretrained(self.folder(base_repo))
        peft_model = get_peft_model(base, LoraConfig(**LORA))
        torch.manual_seed(40)
        with torch.no_grad():
            for parameter in peft_model.parameters():
                if parameter.requires_grad:  # stands in for training: every trainable weight moves
                    parameter.add_(0.1 * torch.randn_like(parameter))
        peft_model.peft_config["default"].base_model_name_or_path = base_repo  # as when the base came from the Hub
        peft_model.save_pretrained(self.folder(repo))
        self.server.publish_folder(repo, self.folder(repo))
        path = self.inputs_path(base_repo)
        expected = outputs_of(peft_model, torch.load(path), "logits")
        self.check(f"{repo}:logits", "peft_adapter", expected, repo=repo, inputs=path)

    def uploading(self):
        return uploading_to(self.server)

    def pushed_run(self, tiny_bert, glue_dir):
        """run_glue.py --push_to_hub, uploading through the server's upload API (`casan_hf.hub.push.push_folder`)."""
        repo, output_dir = "someone/casan-rte", self.root / "push"
        self.server.publish_folder("someone/tiny-bert", tiny_bert)  # the source, named on the card by its repo id
        with self.uploading() as patch:
            patch.setattr(sys, "argv", ["run_glue.py", *map(str, [
                "--model_name_or_path", tiny_bert, "--context_type", "global", "--task_name", "rte",
                "--glue_dir", glue_dir, "--do_train", "--do_eval", "--max_steps", "1", "--save_strategy", "no",
                "--push_to_hub", "--hub_model_id", repo, "--base_model", "someone/tiny-bert",
                "--output_dir", output_dir, *TINY_RUN,
            ])])  # fmt: skip
            load_script("run_glue").main()
        run = pipeline("text-classification", model=str(output_dir))
        self.check(f"{repo}:pipeline", "pipeline", run(SENTENCES), repo=repo, task="text-classification",
                   inputs=SENTENCES)  # fmt: skip
        self.check(f"{repo}:card", "model_card", ModelCard.load(output_dir / "README.md"), repo=repo)

    def pushed_folder(self):
        """scripts/push_to_hub.py of a converted folder, to a new private repository's branch `release`."""
        repo, folder = "someone/casan-converted", self.folder("someone/casan-converted")
        torch.manual_seed(50)
        load_script("convert_bert_to_casan").main(
            ["--model_name_or_path", str(self.folder("bert-for-st")), "--output_dir", str(folder), "--context_type",
             "deep_global", "--head", "sequence-classification", "--num_labels", "2", "--base_model",
             "casan/tiny-st-source", "--model_name", repo]
        )  # fmt: skip
        with self.uploading():
            load_script("push_to_hub").main([str(folder), "--repo_id", repo, "--revision", "release", "--private"])
        inputs = {"input_ids": torch.tensor([[2, 7, 9, 4, 3]]), "attention_mask": torch.ones(1, 5, dtype=torch.long)}
        model = casan_class("bert", "sequence-classification").from_pretrained(folder)
        self.check(f"{repo}:release", "auto_model", outputs_of(model, inputs, "logits"), repo=repo, revision="release",
                   auto_class="AutoModelForSequenceClassification", output="logits",
                   inputs=self.save_inputs(repo, inputs))  # fmt: skip


@pytest.fixture(scope="module")
def published(hub_server, tmp_path_factory, minilm_path, glue_dir):
    publisher = Publisher(hub_server, tmp_path_factory.mktemp("published"))
    publisher.families()
    publisher.revisions()
    publisher.heads()
    publisher.marian()
    publisher.pipelines()
    publisher.sentence_transformers()
    publisher.peft_adapter()
    publisher.pushed_run(make_tiny_bert(tmp_path_factory.mktemp("tiny_bert"), minilm_path), glue_dir)
    publisher.pushed_folder()
    return publisher


def load_from_the_hub(published, environment, python, workdir):
    checks = [
        {name: value for name, value in check.items() if name != "environments"}
        for check in published.checks
        if environment in check["environments"]
    ]
    (workdir / "checks.json").write_text(json.dumps(checks))
    env = published.server.client_env(workdir / "hf_home")
    run_without_casan_hf(HUB_LOADS, workdir, python=python, env=env)
    return torch.load(workdir / "results.pt", weights_only=False)


@pytest.fixture(scope="module")
def loaded_transformers_5(published, tmp_path_factory):
    return load_from_the_hub(published, "transformers-5", sys.executable, tmp_path_factory.mktemp("client5"))


@pytest.fixture(scope="module")
def loaded_transformers_4(published, tmp_path_factory):
    from test_transformers4 import python_4x

    return load_from_the_hub(published, "transformers-4", python_4x(), tmp_path_factory.mktemp("client4"))


def result(request, environment, name):
    """What the check `name` gave in `environment`, from a module fetched from the server."""
    results = request.getfixturevalue(f"loaded_{environment.replace('-', '_')}")
    outcome = results[name]
    assert "error" not in outcome, f"{name} on {environment}:\n{outcome['error']}"
    assert outcome["module"].startswith("transformers_modules."), outcome["module"]
    return outcome


def fetched_commit(outcome):
    """The commit the remote code was fetched at: transformers_modules.<org>.<name>.<commit>.<module>."""
    return outcome["module"].split(".")[-2]


@pytest.mark.parametrize(
    ("family", "environment"),
    [(family.name, environment) for family in FAMILIES for environment in family_environments(family)],
)
def test_every_family_loads_its_classifier_and_automodel_by_repo_id(published, request, environment, family):
    for load, output in (("classifier", "logits"), ("AutoModel", "last_hidden_state")):
        name = f"casan/tiny-{family}:{load}"
        outcome = result(request, environment, name)
        torch.testing.assert_close(outcome[output], published.expected[name], **OUTPUT_TOLERANCE)
    assert fetched_commit(outcome) == published.commits[f"casan/tiny-{family}"][-1]


@pytest.mark.parametrize("environment", ENVIRONMENTS)
@pytest.mark.parametrize("repo", list(HEAD_REPOS))
def test_the_other_heads_load_by_repo_id(published, request, environment, repo):
    head, auto_class, output = HEAD_REPOS[repo]
    name = f"{repo}:{auto_class}"
    torch.testing.assert_close(
        result(request, environment, name)[output], published.expected[name], **OUTPUT_TOLERANCE
    )


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_main_and_a_pinned_revision_give_their_own_logits(published, request, environment):
    first, second, third = published.commits["casan/tiny-bert"]
    main = result(request, environment, "casan/tiny-bert:classifier")
    pinned = result(request, environment, "casan/tiny-bert:pinned")
    torch.testing.assert_close(main["logits"], published.expected["casan/tiny-bert:classifier"], **OUTPUT_TOLERANCE)
    torch.testing.assert_close(pinned["logits"], published.expected["casan/tiny-bert:pinned"], **OUTPUT_TOLERANCE)
    assert not torch.allclose(main["logits"], pinned["logits"])
    assert fetched_commit(main) == third and CODE_MARKER in main["code"]
    assert fetched_commit(pinned) == first and CODE_MARKER not in pinned["code"]


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_code_revision_pins_the_code_apart_from_the_weights(published, request, environment):
    first = published.commits["casan/tiny-bert"][0]
    outcome = result(request, environment, "casan/tiny-bert:code_pinned")
    expected = published.expected["casan/tiny-bert:code_pinned"]  # main's
    torch.testing.assert_close(outcome["logits"], expected, **OUTPUT_TOLERANCE)
    assert fetched_commit(outcome) == first and CODE_MARKER not in outcome["code"]


def test_the_translation_model_generates(published, request):
    outcome = result(request, "transformers-5", "casan/tiny-marian:generate")
    assert torch.equal(outcome["generated"], published.expected["casan/tiny-marian:generate"])


def test_the_translation_model_names_the_transformers_it_needs_on_4x(request):
    """CasanMarianMTModel builds on transformers 5's Marian: on 4.x its config stops the load with the minimum."""
    outcome = request.getfixturevalue("loaded_transformers_4")["casan/tiny-marian:generate"]
    assert "CasanMarian translation models need transformers >= 5.0 (found 4." in outcome["error"]


@pytest.mark.parametrize(
    "environment, task",
    [(environment, task) for task, (*_, environments) in PIPELINES.items() for environment in environments],
)
def test_a_pipeline_per_task(published, request, environment, task):
    outcome = result(request, environment, f"pipeline:{task}")
    expected = published.expected[f"pipeline:{task}"]
    if expected is not None:
        assert _nested_close(outcome["result"], expected), (outcome["result"], expected)
    else:
        assert outcome["result"]["answer"] in PIPELINES[task][1]["context"]


def _nested_close(actual, expected):
    """Pipeline results (lists of dicts of numbers and strings) equal to 1e-4."""
    if isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(_nested_close(actual[k], expected[k]) for k in expected)
    if isinstance(expected, list):
        return len(actual) == len(expected) and all(map(_nested_close, actual, expected))
    if isinstance(expected, float):
        return actual == pytest.approx(expected, rel=1e-4, abs=1e-6)
    return actual == expected


def test_the_sentence_transformers_folder_encodes(published, request):
    outcome = result(request, "transformers-5", "casan/tiny-st:encode")
    torch.testing.assert_close(outcome["embeddings"], published.expected["casan/tiny-st:encode"], **OUTPUT_TOLERANCE)


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_a_peft_adapter_loads_its_base_from_another_repo(published, request, environment):
    outcome = result(request, environment, "casan/tiny-bert-lora:logits")
    torch.testing.assert_close(
        outcome["logits"], published.expected["casan/tiny-bert-lora:logits"], **OUTPUT_TOLERANCE
    )
    adapter = json.loads((published.folder("casan/tiny-bert-lora") / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == "casan/tiny-bert"


def commits_to(server, repo):
    return [write for write in server.writes() if write["action"] == "commit" and write["repo"] == repo]


def test_what_push_to_hub_uploads_is_what_loads(published, request):
    """run_glue.py --push_to_hub: one commit through the server's upload API of the output folder less its `_*`,
    `checkpoint-*`, `training_args.bin` and run record (`run_start.json`) files, with weights, config, every code
    file, the tokenizer and the card, and it loads."""
    repo = "someone/casan-rte"
    (upload,) = commits_to(published.server, repo)
    assert published.server.files(repo) == sorted(upload["files"])
    folder = published.root / "push"
    code_files = {path.name for path in folder.glob("*.py")}
    assert code_files >= {"configuration_casan.py", "modeling_casan.py", "context.py", "pooling.py", "compat.py"}
    assert {"config.json", "model.safetensors", "README.md", "tokenizer.json", "tokenizer_config.json"} | (
        code_files
    ) <= set(upload["files"])
    left_out = set(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())
    left_out -= set(upload["files"])
    assert all(name.startswith(("_", "checkpoint-", "training_args.bin", RUN_START_NAME)) for name in left_out), (
        left_out
    )
    for environment in ENVIRONMENTS:
        outcome = result(request, environment, f"{repo}:pipeline")
        assert _nested_close(outcome["result"], published.expected[f"{repo}:pipeline"])


def test_push_to_hub_script_uploads_a_checked_folder_in_one_commit(published, request):
    """scripts/push_to_hub.py --revision release --private: the repository created private, the branch made, one
    commit of exactly the folder's files, which load by repo id and revision in a fresh process, on both
    transformers."""
    repo = "someone/casan-converted"
    writes = [write for write in published.server.writes() if write["repo"] == repo]
    assert [write["action"] for write in writes] == ["create", "branch", "commit"]
    assert writes[0]["visibility"] == "private" and writes[2]["revision"] == "release"
    assert writes[2]["files"] == upload_files(published.folder(repo))
    assert published.server.files(repo, "release") == writes[2]["files"] and not published.server.files(repo)
    for environment in ENVIRONMENTS:
        outcome = result(request, environment, f"{repo}:release")
        torch.testing.assert_close(outcome["logits"], published.expected[f"{repo}:release"], **OUTPUT_TOLERANCE)


@pytest.mark.parametrize("repo", ["someone/casan-rte", "casan/tiny-st"])
def test_cards_read_from_the_server_hold_what_was_written(published, request, repo):
    outcome = request.getfixturevalue("loaded_transformers_5")[f"{repo}:card"]
    assert "error" not in outcome, outcome["error"]
    written = published.expected[f"{repo}:card"]
    assert outcome["metadata"] == written.data.to_dict() and outcome["text"] == written.text
    assert outcome["eval_results"] == [vars(result) for result in written.data.eval_results or []]
    assert outcome["metadata"]["base_model"] in published.server.repos()
    assert str(published.root.parent) not in outcome["text"]


def test_the_server_answers_a_missing_file_as_the_hub_does(published):
    """transformers probes files a repository may lack: the Hub's 404 EntryNotFound, not olah's 401."""
    import urllib.error
    import urllib.request

    for path in ("casan/tiny-bert/resolve/main/adapter_config.json",
                 "api/models/casan/tiny-bert/tree/main/additional_chat_templates"):  # fmt: skip
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(f"{published.server.url}/{path}")
        assert error.value.code == 404 and error.value.headers["x-error-code"] == "EntryNotFound"


@pytest.fixture(scope="module")
def folder_to_push(tmp_path_factory, minilm_path):
    """A converted tiny CASAN classifier whose card names the repository it goes to, `someone/pushed-again`."""
    root = tmp_path_factory.mktemp("push_again")
    torch.manual_seed(0)
    load_script("convert_bert_to_casan").main(
        ["--model_name_or_path", make_tiny_bert(root / "bert", minilm_path), "--output_dir", str(root / "casan"),
         "--context_type", "global", "--head", "sequence-classification", "--num_labels", "2", "--base_model",
         "someone/tiny-bert", "--model_name", "someone/pushed-again"]
    )  # fmt: skip
    return root / "casan"


def test_a_push_leaves_the_branch_holding_the_folder_and_no_stale_file(hub_server, folder_to_push, tmp_path, capsys):
    """A repository an earlier upload left a pickled `.bin`, a renamed module and an old card in: --dry_run lists
    the commit line by line, and the push ends with the branch holding exactly the folder's upload files."""
    repo, earlier = "someone/pushed-again", tmp_path / "earlier"
    earlier.mkdir()
    torch.save({"weight": torch.zeros(2)}, earlier / "pytorch_model.bin")
    (earlier / "old_modeling.py").write_text("x = 1\n")
    (earlier / "README.md").write_text("An old card.\n")
    hub_server.publish_folder(repo, earlier)
    files = upload_files(folder_to_push)
    with uploading_to(hub_server):
        load_script("push_to_hub").main([str(folder_to_push), "--repo_id", repo, "--dry_run"])
        assert capsys.readouterr().out.splitlines() == [
            f"Would commit to {repo} (main), nothing sent yet:",
            *[f"added {name}" for name in files if name != "README.md"],
            "changed README.md",
            "deleted old_modeling.py",
            "deleted pytorch_model.bin",
        ]
        assert hub_server.files(repo) == ["README.md", "old_modeling.py", "pytorch_model.bin"]
        load_script("push_to_hub").main([str(folder_to_push), "--repo_id", repo])
    (commit,) = [write for write in hub_server.writes() if write["repo"] == repo]
    assert commit["deleted"] == ["old_modeling.py", "pytorch_model.bin"] and commit["files"] == files
    assert hub_server.files(repo) == files


def test_metadata_the_hub_refuses_is_refused_before_a_repository_is_made(hub_server, folder_to_push, tmp_path, capsys):
    """The Hub's own validation of the card (`ModelCard.validate`) runs before `create_repo`: a licence that is no
    Hub id is refused in one line, and no repository is left behind."""
    folder, repo = tmp_path / "folder", "someone/bad-licence"
    shutil.copytree(folder_to_push, folder)
    card = (folder / "README.md").read_text().replace("someone/pushed-again", repo)
    (folder / "README.md").write_text(card.replace("license: apache-2.0", "license: not-a-license"))
    with uploading_to(hub_server), pytest.raises(SystemExit):
        load_script("push_to_hub").main([str(folder), "--repo_id", repo])
    assert capsys.readouterr().err.splitlines()[-1] == (
        f'push_to_hub.py: {folder} is not pushed: README.md: the Hub refuses its metadata ("license" must be one '
        "of the Hub's licence ids, not 'not-a-license')."
    )
    assert not (hub_server.mirrors / "models" / repo).exists()
    assert not [write for write in hub_server.writes() if write["repo"] == repo]
