"""Code copied from transformers stays what transformers has (tests/copies.py, docs/TESTS_TRANSFORMERS.md "Copies of
transformers' code"): every marked block of casan_hf is checked against the installed release, and the check itself
on tiny modules in a temporary folder. Their copies are taken from the installed transformers' source, so these
tests hold on any release, as `make test-latest` runs them."""

import inspect
import textwrap

import pytest
import transformers
from conftest import REPO_ROOT
from copies import check_copies, scan
from transformers.models.bert import modeling_bert


BERT = "transformers.models.bert.modeling_bert"
SELF_OUTPUT = f"{BERT}.BertSelfOutput.forward"


def test_every_marked_copy_matches_transformers():
    failures = check_copies(REPO_ROOT / "casan_hf", REPO_ROOT)
    assert not failures, "\n\n".join(failures)


def source_tail(obj, count):
    """The last `count` lines of an object's source, without their common indentation."""
    return textwrap.dedent("\n".join(inspect.getsource(obj).splitlines()[-count:])).splitlines()


def tiny_module(lines, marker, indent=8, end="# End of copy"):
    """A module whose method holds `lines` as a block opened by `marker`, all at `indent` spaces."""
    block = [marker, *lines, end] if end else [marker, *lines]
    return "\n".join(
        [
            '"""A tiny module of the fixture."""',
            "",
            "",
            "class TinySelfOutput:",
            "    def forward(self, hidden_states, input_tensor):",
            *(" " * indent + line if line else "" for line in block),
            "        return hidden_states",
            "",
        ]
    )


def check(tmp_path, text):
    """check_copies over a package folder holding `text` in a subpackage (the scan goes into subfolders)."""
    folder = tmp_path / "casan_hf" / "models"
    folder.mkdir(parents=True)
    (folder / "tiny.py").write_text(text)
    return check_copies(tmp_path / "casan_hf", tmp_path)


@pytest.mark.parametrize("indent", [8, 12, 4])
def test_a_copy_passes_at_any_indentation(tmp_path, indent):
    lines = source_tail(modeling_bert.BertSelfOutput.forward, 3)
    assert check(tmp_path, tiny_module(lines, f"# Copied from {SELF_OUTPUT}", indent)) == []


def test_replacements_apply_to_the_source(tmp_path):
    """A whole class, renamed by two replacements; blank lines left out or added do not count."""
    replacements = "Bert->Casan,self.dense->self.linear"
    source = inspect.getsource(modeling_bert.BertPooler)
    lines = source.replace("Bert", "Casan").replace("self.dense", "self.linear").splitlines()
    assert "" in lines and any("CasanPooler" in line for line in lines)
    marker = f"# Copied from {BERT}.BertPooler with {replacements}"
    assert check(tmp_path / "renamed", tiny_module(lines, marker, indent=0)) == []

    unreplaced = check(tmp_path / "unreplaced", tiny_module(lines, f"# Copied from {BERT}.BertPooler", indent=0))
    assert len(unreplaced) == 1 and "-class CasanPooler" in unreplaced[0] and "+class BertPooler" in unreplaced[0]

    spaced = [line for line in lines if line][:2] + ["", ""] + [line for line in lines if line][2:]
    assert check(tmp_path / "spaced", tiny_module(spaced, marker, indent=0)) == []


def test_a_changed_line_fails_with_the_diff(tmp_path):
    lines = source_tail(modeling_bert.BertSelfOutput.forward, 3)
    changed = [lines[0], lines[1] + " * 2", lines[2]]
    (failure,) = check(tmp_path, tiny_module(changed, f"# Copied from {SELF_OUTPUT}", indent=12))
    assert failure.startswith(f"casan_hf/models/tiny.py:6: `# Copied from {SELF_OUTPUT}`")
    assert "drifted" in failure and "--- casan_hf/models/tiny.py:7-9 (the copy)" in failure
    assert f"\n-{changed[1]}\n+{lines[1]}\n" in failure, failure


def test_a_line_missing_from_the_copy_shows_as_added(tmp_path):
    lines = source_tail(modeling_bert.BertSelfOutput.forward, 3)
    (failure,) = check(tmp_path, tiny_module([lines[0], lines[2]], f"# Copied from {SELF_OUTPUT}"))
    assert failure.endswith(f"\n {lines[0]}\n+{lines[1]}\n {lines[2]}"), failure


def test_a_marker_without_its_end_fails(tmp_path):
    lines = source_tail(modeling_bert.BertSelfOutput.forward, 3)
    assert check(tmp_path / "missing", tiny_module(lines, f"# Copied from {SELF_OUTPUT}", end=None)) == [
        f"casan_hf/models/tiny.py:6: `# Copied from {SELF_OUTPUT}` has no `# End of copy` at its indentation"
    ]
    (failure,) = check(
        tmp_path / "deeper", tiny_module(lines, f"# Copied from {SELF_OUTPUT}", end="    # End of copy")
    )
    assert failure.startswith("casan_hf/models/tiny.py:6: ") and "before line 10" in failure
    (failure,) = check(tmp_path / "orphan", tiny_module(lines, "# Copied from a fork of transformers"))
    assert failure == "casan_hf/models/tiny.py:10: `# End of copy` closes no `# Copied from transformers...` marker"


@pytest.mark.parametrize(
    "target, missing",
    [
        (f"{BERT}.BertPooler.pool", f"{BERT}.BertPooler has no `pool`"),
        (
            "transformers.models.no_such_model.modeling_no_such_model.Thing",
            "transformers.models has no `no_such_model`",
        ),
    ],
)
def test_an_unknown_object_fails(tmp_path, target, missing):
    lines = source_tail(modeling_bert.BertSelfOutput.forward, 3)
    assert check(tmp_path, tiny_module(lines, f"# Copied from {target}")) == [
        f"casan_hf/models/tiny.py:6: `# Copied from {target}` (transformers {transformers.__version__}) names no "
        f"object: {missing}"
    ]


def test_replacements_must_be_pairs(tmp_path):
    lines = source_tail(modeling_bert.BertSelfOutput.forward, 3)
    assert check(tmp_path, tiny_module(lines, f"# Copied from {SELF_OUTPUT} with Bert to Casan")) == [
        "casan_hf/models/tiny.py:6: `with Bert to Casan` is not `old->new` pairs joined by commas"
    ]


def test_a_comment_that_goes_on_after_the_path_is_no_marker(tmp_path):
    """As DeBERTa-v2's `# Copied from ...DebertaV2Encoder.__init__, after its layers`, written before the check."""
    path = tmp_path / "legacy.py"
    lines = source_tail(modeling_bert.BertSelfOutput.forward, 3)
    path.write_text(tiny_module(lines, f"# Copied from {SELF_OUTPUT}, after its layers", end=None))
    assert scan(path, tmp_path) == ([], [])
