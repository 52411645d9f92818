"""The explorer as a person uses it: scripts/explore.py serves the converted real MiniLM (compared with the
MiniLM it came from) from the demo environment, and headless Chromium (Debian's, driven through its ChromeDriver
by Selenium) types a sentence, runs it, reads the page, switches layer and head, and saves a screenshot. A Space
folder written for the same two checkpoints serves its own app.py, whose checkpoint boxes take no typing.

Debian's chromium and chromium-driver come from `make browser` (part of `make test`); nothing is downloaded
(`headless_chromium.py`).
"""

import os
import subprocess
import urllib.request

import pytest
import torch
from conftest import REPO_ROOT, load_script
from headless_chromium import headless_chromium
from local_server import free_port, wait_until_serving
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from casan_hf.inspection import inspect_attention, load_for_inspection, predict


DEMO_PYTHON = REPO_ROOT / ".venv-demo" / "bin" / "python"
SENTENCE = "A gripping, funny film that never drags."
CONTEXT_LAYERS = (0, 1, 2, 3)  # of MiniLM's 6: layers 4 and 5 take no context, and are drawn grey
LAYER, HEAD = 2, 3
WAIT = 120  # seconds: the first run on a loaded 2-core machine


# The two checkpoints sit in folders named like Hub ids and are served from their parent folder, so that the page
# (and its screenshot, docs/images/explorer.png) shows the names a reader expects, not this machine's paths.
CASAN_NAME, BERT_NAME = "you/casan-minilm", "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, minilm_path):
    """The folder holding `BERT_NAME` (the real MiniLM) and `CASAN_NAME`: the MiniLM converted to a CASAN sequence
    classifier with structured pooling (its head is untrained)."""
    root = tmp_path_factory.mktemp("explorer")
    (root / BERT_NAME).parent.mkdir()
    (root / BERT_NAME).symlink_to(minilm_path, target_is_directory=True)
    torch.manual_seed(0)
    load_script("convert_bert_to_casan").main(
        [
            *("--model_name_or_path", minilm_path, "--output_dir", str(root / CASAN_NAME)),
            *("--context_type", "deep_global", "--context_layers", *map(str, CONTEXT_LAYERS)),
            *("--head", "sequence-classification", "--num_labels", "2", "--classifier_pooling", "structured"),
        ]
    )
    return root


def serve(command, port, cwd, log):
    """Runs `command` (a Gradio app serving on loopback `port`: the flag given, or Gradio's port variable) in `cwd`
    from the demo environment; yields its URL once it answers, and stops it after."""
    if not DEMO_PYTHON.exists():
        pytest.fail(f"{DEMO_PYTHON} not found: `make install-demo` builds the explorer's environment.")
    full_env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "OMP_NUM_THREADS": "1",
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
    }
    with open(log, "w") as output:
        process = subprocess.Popen(
            [str(DEMO_PYTHON), *map(str, command)], cwd=cwd, env=full_env, stdout=output, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}/"

    def serving():
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200

    try:
        wait_until_serving(process, serving, WAIT, log.read_text)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def server(checkpoints, tmp_path_factory):
    """The explorer's URL, served by scripts/explore.py from .venv-demo in the folder of the checkpoints."""
    port = free_port()
    command = [REPO_ROOT / "scripts" / "explore.py", "--model", CASAN_NAME, "--compare", BERT_NAME, "--port", port]
    yield from serve(command, port, checkpoints, tmp_path_factory.mktemp("server") / "explore.log")


@pytest.fixture(scope="module")
def space_server(checkpoints, tmp_path_factory):
    """The URL of the Space folder that `scripts/explore.py --space_dir` writes for the two checkpoints, its app.py
    served as the Hub serves it (the folder's own copy of casan_hf), in the folder of the checkpoints, where their
    names resolve as Hub ids would."""
    space = tmp_path_factory.mktemp("space") / "space"
    written = subprocess.run(
        [DEMO_PYTHON, REPO_ROOT / "scripts" / "explore.py", "--model", CASAN_NAME, "--compare", BERT_NAME,
         "--space_dir", space],
        capture_output=True, text=True, timeout=WAIT,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr[-3000:]
    yield from serve([space / "app.py"], free_port(), checkpoints, tmp_path_factory.mktemp("server") / "space.log")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with headless_chromium(tmp_path_factory.mktemp("chromium-profile"), window="1400,1800") as driver:
        yield driver


def run(browser, text, model=None):
    """Types `text` (and `model`, if given) into the page and presses Run."""
    for box, value in (("#text textarea", text), ("#model textarea, #model input", model)):
        if value is not None:
            field = browser.find_element(By.CSS_SELECTOR, box)
            field.clear()
            field.send_keys(value)
    browser.find_element(By.CSS_SELECTOR, "#run").click()


def wait_for_text(browser, selector, text):
    WebDriverWait(browser, WAIT).until(
        expected_conditions.text_to_be_present_in_element((By.CSS_SELECTOR, selector), text)
    )


def test_explorer_in_a_browser(server, browser, checkpoints, tmp_path):
    model, tokenizer = load_for_inspection(str(checkpoints / CASAN_NAME))
    expected = inspect_attention(model, tokenizer, SENTENCE)
    prediction = predict(model, tokenizer, expected)

    browser.get(server)
    WebDriverWait(browser, WAIT).until(expected_conditions.element_to_be_clickable((By.CSS_SELECTOR, "#run")))
    # A folder that does not exist: a message on the page, and the page keeps working.
    run(browser, SENTENCE, model=str(tmp_path / "missing"))
    wait_for_text(browser, "#status", f"Cannot show '{tmp_path / 'missing'}'")
    run(browser, SENTENCE, model=CASAN_NAME)
    WebDriverWait(browser, WAIT).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "#gates td[data-value]"))
    )

    # The tokens, down the gate heatmap's rows; the prediction; a gate value as the model computes it.
    gates = browser.find_element(By.CSS_SELECTOR, "#gates table")
    assert [th.text for th in gates.find_elements(By.CSS_SELECTOR, "tbody th")] == expected.tokens
    assert f"casan-minilm: {prediction.summary}" in browser.find_element(By.CSS_SELECTOR, "#prediction").text
    token = expected.tokens.index("funny")
    cell = gates.find_elements(By.CSS_SELECTOR, "tbody tr")[token].find_elements(By.CSS_SELECTOR, "td")[1]
    gate = float(expected.query_gates[1, token])
    assert float(cell.get_attribute("data-value")) == pytest.approx(gate, rel=1e-4)
    assert cell.text == f"{gate:.3f}" and cell.get_attribute("title") == f"funny: query gate of layer 1 = {gate:.4f}"
    grey = gates.find_elements(By.CSS_SELECTOR, "td.casan-none")
    assert len(grey) == len(expected.tokens) * 2 * (6 - len(CONTEXT_LAYERS))
    assert "no gates (BertModel has no context)" in browser.find_element(By.CSS_SELECTOR, "#gates").text
    assert "pooling hops" in browser.find_element(By.CSS_SELECTOR, "#hops").text

    # Another layer and head: the maps of the state kept from the run, with their difference.
    browser.find_element(By.XPATH, f"//*[@id='layer']//label[normalize-space()='{LAYER}']").click()
    browser.find_element(By.XPATH, f"//*[@id='head']//label[normalize-space()='{HEAD}']").click()
    wait_for_text(browser, "#attention", f"attention of layer {LAYER}, head {HEAD}")
    wait_for_text(browser, "#attention", f"difference, layer {LAYER}, head {HEAD}")
    maps = browser.find_elements(By.CSS_SELECTOR, "#attention table.casan-map")
    assert len(maps) == 3
    first_row = maps[0].find_elements(By.CSS_SELECTOR, "tbody tr")[0].find_elements(By.CSS_SELECTOR, "td")
    assert [float(td.get_attribute("data-value")) for td in first_row] == pytest.approx(
        expected.attentions[LAYER, HEAD, 0].tolist(), rel=1e-4, abs=1e-7
    )

    # The whole page in one picture: a viewport as tall as the page (headless Chromium caps the window's size).
    height = browser.execute_script("return document.documentElement.scrollHeight")
    metrics = {"width": 1400, "height": height, "deviceScaleFactor": 1, "mobile": False}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    screenshot = tmp_path / "explorer.png"
    assert browser.save_screenshot(str(screenshot)) and screenshot.stat().st_size > 10_000
    print(f"screenshot: {screenshot}")


def test_a_space_runs_only_the_checkpoints_it_was_written_for(space_server, browser, checkpoints):
    """The Space's checkpoint boxes show its two models and take no typing; a run shows those models."""
    model, tokenizer = load_for_inspection(str(checkpoints / CASAN_NAME))
    prediction = predict(model, tokenizer, inspect_attention(model, tokenizer, SENTENCE))

    browser.get(space_server)
    WebDriverWait(browser, WAIT).until(expected_conditions.element_to_be_clickable((By.CSS_SELECTOR, "#run")))
    for box, name in (("#model", CASAN_NAME), ("#compare", BERT_NAME)):
        field = browser.find_element(By.CSS_SELECTOR, f"{box} textarea, {box} input")
        assert field.get_attribute("value") == name and not field.is_enabled()
    run(browser, SENTENCE)
    wait_for_text(browser, "#prediction", f"casan-minilm: {prediction.summary}")
    assert "no gates (BertModel has no context)" in browser.find_element(By.CSS_SELECTOR, "#gates").text
