"""tests/slow_tests.txt, the tests `make test-quick` leaves out, names only tests that exist: a renamed or removed
test would otherwise drop out of the list silently and run in the quick tier."""

import ast
from functools import cache

from conftest import REPO_ROOT, SLOW_TESTS


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
