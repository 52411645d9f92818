"""The optional packages the scripts use, each with the casan-hf extra that installs it. Every script checks the
packages its requested work needs before it starts, so a missing or broken one stops it at once with the command
that installs it, never after training (run_translation scores BLEU only at its first evaluation).

The check imports each module: a package that is installed but cannot be imported (a broken install, a missing
dependency of its own) is found to be there by `importlib.util.find_spec`, and would fail only where it is used."""

import importlib
import importlib.util
import sys


# import name -> (distribution, the extra of pyproject.toml that pins it)
PACKAGES = {
    "accelerate": ("accelerate", "train"),
    "datasets": ("datasets", "train"),
    "evaluate": ("evaluate", "train"),
    "sklearn": ("scikit-learn", "train"),
    "scipy": ("scipy", "train"),
    "sacrebleu": ("sacrebleu", "translation"),
    "onnx": ("onnx", "export"),
    "onnxruntime": ("onnxruntime", "export"),
    "onnxscript": ("onnxscript", "export"),
    "matplotlib": ("matplotlib", "plot"),
}
# What each kind of work imports.
TRAINING = ("accelerate", "datasets")  # Trainer and the data of every training script
GLUE = (*TRAINING, "evaluate", "sklearn", "scipy")  # and the GLUE metrics


def import_error(module):
    """The error importing `module` raises (its type and first line), or None when it imports."""
    try:
        importlib.import_module(module)
    except Exception as error:  # a broken package raises whatever its own imports raise
        first_line = next(iter(str(error).splitlines()), "")
        return f"{type(error).__name__}: {first_line}" if first_line else type(error).__name__
    return None


def missing_packages_message(what, modules):
    """One line saying which of `modules` (import names) `what` needs and lacks, and the pip command that
    installs them; None when every one imports. A package that is not installed is named with its extra; one
    that is installed but fails to import, with its import error and the command that reinstalls it."""
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if missing:
        names = [PACKAGES[module][0] for module in missing]
        extras = ",".join(dict.fromkeys(PACKAGES[module][1] for module in missing))
        verb = "is" if len(names) == 1 else "are"
        return f'{what} needs {", ".join(names)}, which {verb} not installed: pip install "casan-hf[{extras}]"'
    errors = {PACKAGES[module][0]: import_error(module) for module in modules}
    broken = {distribution: error for distribution, error in errors.items() if error is not None}
    if broken:
        names = " and ".join(f"{distribution} ({error})" for distribution, error in broken.items())
        verb = "is" if len(broken) == 1 else "are"
        return (
            f"{what} needs {names}, which {verb} installed but cannot be imported: "
            f"pip install --force-reinstall {' '.join(broken)}"
        )
    return None


def require_packages(script, *modules, what=None):
    """Stops `script` with `<script>: error: ...` and the pip command when one of `modules` is missing or fails
    to import."""
    message = missing_packages_message(what or script, modules)
    if message is not None:
        sys.exit(f"{script}: error: {message}")


__all__ = ["GLUE", "PACKAGES", "TRAINING", "missing_packages_message", "require_packages"]
