"""The optional packages the scripts use, each with the casan-hf extra that installs it. Every script checks the
packages its requested work needs before it starts, so a missing one stops it at once with the command that
installs it, never after training (run_translation scores BLEU only at its first evaluation)."""

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


def missing_packages_message(what, modules):
    """One line saying which of `modules` (import names) `what` needs and lacks, and the pip command that
    installs them; None when every one is there."""
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    names = [PACKAGES[module][0] for module in missing]
    extras = ",".join(dict.fromkeys(PACKAGES[module][1] for module in missing))
    verb = "is" if len(names) == 1 else "are"
    return f'{what} needs {", ".join(names)}, which {verb} not installed: pip install "casan-hf[{extras}]"'


def require_packages(script, *modules, what=None):
    """Stops `script` with `<script>: error: ...` and the pip command when one of `modules` is missing."""
    message = missing_packages_message(what or script, modules)
    if message is not None:
        sys.exit(f"{script}: error: {message}")


__all__ = ["GLUE", "PACKAGES", "TRAINING", "missing_packages_message", "require_packages"]
