"""transformers' own common model tests, `test_modeling_common.py` and `test_configuration_common.py` of the
installed release, as the Makefile takes them from its sdist into `.transformers-tests/<version>/`.

They are modules of transformers' `tests` package and import three of its files that the sdist does not carry:
the export tests' mixin, the generation tests' mixin and the common config keyword arguments. Those are stood in
for here (`docs/TESTS.md` says what that leaves out), and the two files load as the package `transformers_tests`."""

import importlib
import importlib.machinery
import importlib.util
import sys
import types

import transformers
from conftest import REPO_ROOT


TRANSFORMERS_TESTS = REPO_ROOT / ".transformers-tests" / transformers.__version__

# General config arguments, each away from its default: a config class must set every one of them as given.
CONFIG_COMMON_KWARGS = {
    "return_dict": False,
    "output_hidden_states": True,
    "dtype": "float16",
    "chunk_size_feed_forward": 5,
    "is_encoder_decoder": False,
    "architectures": ["BertModel"],
    "id2label": {0: "negative", 1: "positive"},
    "label2id": {"negative": 0, "positive": 1},
    "problem_type": "single_label_classification",
    "pad_token_id": 2,
    "bos_token_id": 3,
    "eos_token_id": 4,
}


class ExportTesterMixin:
    """Stands in for `tests/exporters/test_export.py` (not in the sdist): no export tests. ONNX export is
    tested by tests/test_export_onnx.py."""


class GenerationTesterMixin:
    """Stands in for `tests/generation/test_utils.py` (not in the sdist): the encoders do not generate."""


STAND_INS = {
    "exporters.test_export": {"ExportTesterMixin": ExportTesterMixin},
    "generation.test_utils": {"GenerationTesterMixin": GenerationTesterMixin},
    "utils.test_configuration_utils": {"config_common_kwargs": CONFIG_COMMON_KWARGS},
}


def missing_common_tests():
    """Why the installed release's common tests cannot run (they are not fetched), or None."""
    if (TRANSFORMERS_TESTS / "test_modeling_common.py").is_file():
        return None
    return (
        f"{TRANSFORMERS_TESTS} has no test_modeling_common.py of transformers {transformers.__version__}: "
        "`make test` (or `make test-latest`) takes it from the release's sdist"
    )


def load_common_tests():
    """The modules `test_modeling_common` and `test_configuration_common` of the installed transformers."""
    package = importlib.machinery.ModuleSpec("transformers_tests", None, is_package=True)
    package.submodule_search_locations = [str(TRANSFORMERS_TESTS)]
    sys.modules["transformers_tests"] = importlib.util.module_from_spec(package)
    for name, attributes in STAND_INS.items():
        parent, _ = name.split(".")
        sys.modules.setdefault(f"transformers_tests.{parent}", types.ModuleType(f"transformers_tests.{parent}"))
        module = types.ModuleType(f"transformers_tests.{name}")
        module.__dict__.update(attributes)
        sys.modules[f"transformers_tests.{name}"] = module
    return (
        importlib.import_module("transformers_tests.test_modeling_common"),
        importlib.import_module("transformers_tests.test_configuration_common"),
    )


__all__ = ["TRANSFORMERS_TESTS", "load_common_tests", "missing_common_tests"]
