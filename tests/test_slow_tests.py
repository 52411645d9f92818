"""tests/slow_tests.txt, the tests `make test-quick` leaves out, names only tests that exist: a renamed or removed
test would otherwise drop out of the list silently and run in the quick tier. tests/file_seconds.txt, the order the
files start in, names only test files that exist: a renamed file would otherwise start last."""

import ast
from functools import cache

from conftest import FILE_SECONDS, REPO_ROOT, SLOW_TESTS


@cache
def defined_names(path):
    """The names of the functions and classes defined in the test file `path`."""
    tree = ast.parse((REPO_ROOT / path).read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def test_every_slow_test_named_is_a_test_function_or_class_of_its_file():
    missing = []
    for name in sorted(SLOW_TESTS):
        path, *objects = name.split("::")
        if len(objects) != 1 or objects[0] not in defined_names(path):
            missing.append(name)
    assert missing == []


def test_every_file_timed_is_a_test_file():
    assert [name for name in FILE_SECONDS if not (REPO_ROOT / name).is_file()] == []
    assert len(FILE_SECONDS) > len(list((REPO_ROOT / "tests").glob("test_*.py"))) // 2
