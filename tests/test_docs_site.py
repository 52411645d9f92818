"""The docs site as a reader uses it: the site `make docs-site` builds into site/ (strictly: broken links and
references fail the build; `make test` builds it first), served on loopback, opened in headless Chromium
(`headless_chromium.py`): the home page with its navigation; the API reference, generated from the docstrings: its
index linking every API page, each class with its own documented members (no builtin type's docstring, no config
field listed under a model class); a search that finds an option; and no page a reader reads from start to end
longer than `LONGEST_PAGE` lines."""

import functools
import http.server
import inspect
import threading

import pytest
from conftest import REPO_ROOT
from headless_chromium import headless_chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from casan_hf.options import OPTIONS


SITE = REPO_ROOT / "site"
WAIT = 30  # seconds
LONGEST_PAGE = 400  # lines: past it, a page is split into pages of one topic each
# The one page kept as a record rather than read through: every earlier speed measurement.
ARCHIVE = "docs/BENCHMARKS_HISTORY.md"
# The API pages, by their site paths (docs/api/X.md at api/X/), and the index that links them.
API_PAGES = sorted(f"api/{page.stem}/" for page in (REPO_ROOT / "docs" / "api").glob("*.md") if page.stem != "index")
# The types of the values of class attributes, whose docstrings runtime inspection would give the attributes.
VALUE_TYPES = (str, bytes, int, float, bool, tuple, list, dict, set, frozenset)


@pytest.fixture(scope="module")
def site_url():
    if not (SITE / "index.html").is_file():
        pytest.fail(f"{SITE / 'index.html'} not found: `make docs-site` builds the site.")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    thread.join()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with headless_chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver


def visible(browser, selector):
    return WebDriverWait(browser, WAIT).until(expected_conditions.visibility_of_element_located(selector))


def test_the_home_page_is_the_readme_with_the_navigation_by_task(browser, site_url):
    browser.get(site_url)
    assert visible(browser, (By.TAG_NAME, "h1")).text.startswith("casan-hf")
    navigation = browser.find_element(By.CSS_SELECTOR, "nav.md-nav--primary").get_attribute("textContent")
    for section in ("Install and convert", "Fine-tune", "Compare with the twin", "Translate", "Share and load"):
        assert section in navigation
    assert "API reference" in navigation


def test_an_api_page_holds_the_reference_generated_from_the_docstrings(browser, site_url):
    browser.get(site_url + "api/configs/")
    heading = visible(browser, (By.ID, "casan_hf.CasanConfig"))
    assert "CasanConfig" in heading.text
    # The options' entries, which the config's docstring takes from the option table at import time.
    text = browser.find_element(By.TAG_NAME, "article").text
    assert [option.name for option in OPTIONS if option.name not in text] == []


def test_the_api_index_links_every_api_page(browser, site_url):
    browser.get(site_url + "api/")
    assert visible(browser, (By.TAG_NAME, "h1")).text == "API reference"
    links = browser.find_elements(By.CSS_SELECTOR, "article a:not(.headerlink)")
    assert sorted(link.get_attribute("href") for link in links) == [site_url + page for page in API_PAGES]


@pytest.mark.parametrize("page", API_PAGES)
def test_an_api_page_holds_no_docstring_of_a_builtin_type(browser, site_url, page):
    browser.get(site_url + page)
    text = visible(browser, (By.TAG_NAME, "article")).text
    first_lines = {value_type.__name__: inspect.getdoc(value_type).splitlines()[0] for value_type in VALUE_TYPES}
    assert {name: line for name, line in first_lines.items() if line in text} == {}


def test_a_model_class_lists_its_own_members_and_not_the_config_fields(browser, site_url):
    browser.get(site_url + "api/models/")
    visible(browser, (By.ID, "casan_hf.CasanForSequenceClassification"))
    contents = browser.find_elements(By.CSS_SELECTOR, "nav.md-nav--secondary a.md-nav__link")
    entries = {entry.get_attribute("textContent").strip() for entry in contents}
    assert {"CasanForSequenceClassification", "from_pretrained", "model_tags"} <= entries
    assert entries & {option.name for option in OPTIONS} == set()


def test_search_finds_a_page_by_a_word_of_its_text(browser, site_url):
    browser.get(site_url)
    search = WebDriverWait(browser, WAIT).until(
        expected_conditions.element_to_be_clickable((By.CSS_SELECTOR, "input.md-search__input"))
    )
    search.click()
    search.send_keys("preemption")
    result = visible(browser, (By.CSS_SELECTOR, ".md-search-result__item a"))
    assert result.get_attribute("href").startswith(site_url)
    assert result.get_attribute("href").startswith(site_url + "SCALING/")  # "Preemption: SIGTERM and SIGUSR1 ..."


def test_no_page_a_reader_reads_through_is_longer_than_the_limit():
    lines = {
        f"docs/{page.name}": len(page.read_text(encoding="utf-8").splitlines())
        for page in sorted((REPO_ROOT / "docs").glob("*.md"))
    }
    too_long = {page: count for page, count in lines.items() if page != ARCHIVE and count > LONGEST_PAGE}
    assert too_long == {}, f"pages over {LONGEST_PAGE} lines (page: lines), to split by topic: {too_long}"
