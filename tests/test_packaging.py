"""What an install of casan-hf holds: every folder of casan_hf/ as a package (pyproject.toml lists them), and the
top-level model_cards/ as `casan_hf.model_cards`, from which the card template ships: a regular install (the wheel)
holds the template and none of the release set's cards, and an editable install's finder maps the package onto the
folder itself (no copy, no link). The wheel holds only what users import: none of the repository's tooling
(tooling/, scripts/), and no module that reads the repository's docs or imports that tooling."""

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from setuptools import find_namespace_packages
from setuptools.config.pyprojecttoml import read_configuration


REPO_ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = read_configuration(REPO_ROOT / "pyproject.toml")["tool"]["setuptools"]
BUILD_BOTH = "from setuptools import build_meta; build_meta.build_wheel('dist'); build_meta.build_editable('editable')"


def test_every_folder_of_casan_hf_is_a_listed_package():
    folders = set(find_namespace_packages(str(REPO_ROOT), include=["casan_hf*"]))
    assert set(PYPROJECT["packages"]) == folders | {"casan_hf.model_cards"}
    assert PYPROJECT["package-dir"] == {"casan_hf.model_cards": "model_cards"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The wheel and the editable wheel built from a copy of the checkout's package, cards, tooling and scripts:
    `(source folder, wheel, editable wheel)`."""
    source = tmp_path_factory.mktemp("build") / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    for name in ("casan_hf", "model_cards", "tooling", "scripts"):
        shutil.copytree(REPO_ROOT / name, source / name, ignore=ignore)
    subprocess.run([sys.executable, "-c", BUILD_BOTH], cwd=source, check=True, capture_output=True)
    (wheel,) = (source / "dist").glob("*.whl")
    (editable,) = (source / "editable").glob("*.whl")
    return source, wheel, editable


def test_the_wheel_ships_the_template_from_model_cards_and_the_editable_install_maps_the_folder(built):
    source, wheel, editable = built
    shipped = [name for name in zipfile.ZipFile(wheel).namelist() if name.startswith("casan_hf/model_cards/")]
    assert sorted(shipped) == ["casan_hf/model_cards/__init__.py", "casan_hf/model_cards/model_card_template.md"]
    finder = next(name for name in zipfile.ZipFile(editable).namelist() if name.endswith("_finder.py"))
    mapping = zipfile.ZipFile(editable).read(finder).decode()
    assert f"'casan_hf.model_cards': '{source / 'model_cards'}'" in mapping


def repository_reads(source):
    """What a module's code (its docstrings aside) names of the repository around the package: strings that start
    with one of its folders (`docs/`, `scripts/`), and imports of its tooling."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    strings = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]
    imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level]
    imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    return [text for text in strings if text.startswith(("docs/", "scripts/"))] + [
        name for name in imported if name.split(".")[0] == "tooling"
    ]


def test_the_wheel_holds_only_the_library_and_no_module_that_reads_the_repository(built):
    _, wheel, _ = built
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names if ".dist-info/" not in name} == {"casan_hf"}
    modules = {name: zipfile.ZipFile(wheel).read(name).decode() for name in names if name.endswith(".py")}
    assert "casan_hf/studies/__init__.py" in modules
    assert {name: repository_reads(text) for name, text in modules.items() if repository_reads(text)} == {}


def test_the_check_finds_a_module_that_reads_the_docs_or_imports_the_tooling():
    module = '''"""Reads docs/RESULTS.md (a docstring may say so)."""\nfrom tooling.catalog import STUDIES\n'''
    assert repository_reads(module + 'PATH = "docs/results/x.json"\n') == ["docs/results/x.json", "tooling.catalog"]
