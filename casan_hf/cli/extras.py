"""The optional packages each kind of work needs, by the casan-hf extra that installs them. Every script checks
the extras its requested work needs before it starts, so a missing package stops it at once with the command
that installs it, never after training (run_translation scores BLEU only at its first evaluation)."""

import importlib.util
import sys


# extra -> the (import name, distribution) of each package it installs that the scripts use; pyproject.toml's
# [project.optional-dependencies] pins them.
EXTRAS = {
    "train": (("accelerate", "accelerate"), ("datasets", "datasets"), ("evaluate", "evaluate"),
              ("sklearn", "scikit-learn"), ("scipy", "scipy")),
    "translation": (("sacrebleu", "sacrebleu"),),
    "export": (("onnx", "onnx"), ("onnxruntime", "onnxruntime"), ("onnxscript", "onnxscript")),
    "plot": (("matplotlib", "matplotlib"),),
}  # fmt: skip


def missing_extras(extras):
    """`{extra: [distribution, ...]}` of the packages of `extras` that cannot be imported here."""
    missing = {}
    for extra in extras:
        absent = [name for module, name in EXTRAS[extra] if importlib.util.find_spec(module) is None]
        if absent:
            missing[extra] = absent
    return missing


def missing_extras_message(what, extras):
    """One line saying what `what` needs and how to install it, or None when every package is there."""
    missing = missing_extras(extras)
    if not missing:
        return None
    packages = ", ".join(name for names in missing.values() for name in names)
    install = f'pip install "casan-hf[{",".join(missing)}]"'
    return f"{what} needs {packages}, which {'is' if ',' not in packages else 'are'} not installed: {install}"


def require_extras(script, *extras, what=None):
    """Stops `script` with `<script>: error: ...` and the pip command when a package of `extras` is missing."""
    message = missing_extras_message(what or script, extras)
    if message is not None:
        sys.exit(f"{script}: error: {message}")


__all__ = ["EXTRAS", "missing_extras", "missing_extras_message", "require_extras"]
