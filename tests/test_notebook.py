"""notebooks/quickstart.ipynb: the committed notebook is its paired jupytext script (notebooks/quickstart.py) with no
outputs, and it runs whole in a Jupyter kernel (nbclient) at small settings, offline: convert MiniLM, fine-tune it
and its twin for two steps on MRPC, plot the gates, save, reload with transformers, and a push dry run whose checks
pass and that stops, saying so, where it needs the Hub."""

import jupytext
import nbformat
from conftest import REPO_ROOT
from nbclient import NotebookClient


NOTEBOOK = REPO_ROOT / "notebooks" / "quickstart.ipynb"
SCRIPT = REPO_ROOT / "notebooks" / "quickstart.py"
SMALL = {
    "QUICKSTART_STEPS": "2",
    "QUICKSTART_TRAIN_EXAMPLES": "8",
    "QUICKSTART_EVAL_EXAMPLES": "8",
    "QUICKSTART_BATCH_SIZE": "4",
}


def cells(notebook):
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


def test_the_notebook_is_its_paired_script_without_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert cells(notebook) == cells(jupytext.read(SCRIPT)), "run `jupytext --sync notebooks/quickstart.py`"
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "outputs are stripped from the committed file"


def test_the_notebook_runs_at_small_settings(tmp_path, monkeypatch, glue_dir):
    for name, value in {
        **SMALL,
        "QUICKSTART_OUTPUT": str(tmp_path / "out"),
        "QUICKSTART_GLUE_DIR": str(glue_dir),
    }.items():
        monkeypatch.setenv(name, value)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp_path}}).execute()
    printed = "".join(
        output.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs
    )
    assert "dev accuracy" in printed and "reloaded logits equal: True" in printed
    assert "The folder's checks passed; the dry run needs the Hub" in printed
    assert any(output.output_type == "display_data" for cell in notebook.cells for output in cell.get("outputs", []))
