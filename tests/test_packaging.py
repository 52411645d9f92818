"""What an install of casan-hf holds: every folder of casan_hf/ as a package (pyproject.toml lists them), and the
top-level model_cards/ as `casan_hf.model_cards`, from which the card template ships: a regular install (the wheel)
holds the template and none of the release set's cards, and an editable install's finder maps the package onto the
folder itself (no copy, no link)."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from setuptools import find_namespace_packages
from setuptools.config.pyprojecttoml import read_configuration


REPO_ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = read_configuration(REPO_ROOT / "pyproject.toml")["tool"]["setuptools"]
BUILD_BOTH = "from setuptools import build_meta; build_meta.build_wheel('dist'); build_meta.build_editable('editable')"


def test_every_folder_of_casan_hf_is_a_listed_package():
    folders = set(find_namespace_packages(str(REPO_ROOT), include=["casan_hf*"]))
    assert set(PYPROJECT["packages"]) == folders | {"casan_hf.model_cards"}
    assert PYPROJECT["package-dir"] == {"casan_hf.model_cards": "model_cards"}


def test_the_wheel_ships_the_template_from_model_cards_and_the_editable_install_maps_the_folder(tmp_path):
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    for name in ("casan_hf", "model_cards"):
        shutil.copytree(REPO_ROOT / name, source / name, ignore=ignore)
    subprocess.run([sys.executable, "-c", BUILD_BOTH], cwd=source, check=True, capture_output=True)
    (wheel,) = (source / "dist").glob("*.whl")
    shipped = [name for name in zipfile.ZipFile(wheel).namelist() if name.startswith("casan_hf/model_cards/")]
    assert sorted(shipped) == ["casan_hf/model_cards/__init__.py", "casan_hf/model_cards/model_card_template.md"]
    (editable,) = (source / "editable").glob("*.whl")
    finder = next(name for name in zipfile.ZipFile(editable).namelist() if name.endswith("_finder.py"))
    mapping = zipfile.ZipFile(editable).read(finder).decode()
    assert f"'casan_hf.model_cards': '{source / 'model_cards'}'" in mapping
