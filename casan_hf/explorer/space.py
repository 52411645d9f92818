"""A folder that the Hugging Face Hub serves as a Space: the explorer for a model on the Hub.

The folder holds `app.py` (which builds the explorer for the model's Hub id, with its checkpoints fixed), a copy
of this casan_hf package (the app's code, and the CASAN classes, so that no remote code runs), `requirements.txt`
with every package the app needs pinned to the version installed here, where the explorer was tested, and a README
whose metadata tells the Hub the SDK (Gradio, at the version installed here) and the Python version.
"""

import shutil
import sys
from importlib import metadata
from pathlib import Path

from huggingface_hub import SpaceCard, SpaceCardData
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from .. import model_cards
from ..hub import check_output_dir, is_hub_id
from ..hub.card import TEMPLATE_NAME


PACKAGE = "casan-hf"
# The Space's SDK: set by `sdk_version` in the README, so requirements.txt leaves it out.
SDK = "gradio"
APP = '''"""The CASAN explorer for {model} (written by scripts/explore.py --space_dir)."""

from casan_hf.explorer.app import build_app


# The page runs these checkpoints only: a visitor can neither load another model nor name a path of the Space.
build_app(model={model!r}, compare={compare!r}, fixed_checkpoints=True).launch()
'''
README_BODY = """# CASAN explorer: {model}

What context-aware self-attention (CASAN, Yang et al. AAAI 2019) does on a text you type: the prediction of
[{model}](https://huggingface.co/{model}), the query and key gates of every layer, the attention of a chosen layer
and head, and the pooling hops where the head pools with attention.{compare_line}

Written by `scripts/explore.py --space_dir` of casan-hf {version}; `casan_hf/` is that package's code.
"""


def installed_requirements(requirements, extras):
    """`requirements` (strings) that apply here with `extras`, as `Requirement`s."""
    applying = []
    for text in requirements or ():
        requirement = Requirement(text)
        if requirement.marker is None or any(requirement.marker.evaluate({"extra": extra}) for extra in extras):
            applying.append(requirement)
    return applying


def installed(name):
    """The installed distribution `name`, or a RuntimeError saying where the Space is to be written from."""
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError as error:
        raise RuntimeError(
            f"{name} is not installed: write the Space from the environment of casan-hf[demo] (make install-demo: "
            ".venv-demo), whose versions it pins."
        ) from error


def space_requirements():
    """Every package casan-hf and its demo extra need, with what those need in turn, pinned to the installed
    version ("name==version"), the SDK aside; a RuntimeError where one is not installed."""
    pins, pending = {}, installed_requirements(metadata.requires(PACKAGE), ("", "demo"))
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in pins or name == SDK:
            continue
        try:
            distribution = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError as error:
            raise RuntimeError(
                f"{requirement.name} is not installed: run --space_dir in the environment of casan-hf[demo] "
                "(make install-demo), which the Space's pins are taken from."
            ) from error
        # The public version: PyPI has no local builds such as torch's "2.13.0+cpu".
        pins[name] = f"{distribution.metadata['Name']}=={Version(distribution.version).public}"
        pending += installed_requirements(distribution.requires, [""] + list(requirement.extras))
    return sorted(pins.values(), key=str.lower)


def write_space(space_dir, model, compare=None, overwrite=False):
    """Writes the Space folder for the Hub ids `model` (and `compare`); refuses a local folder (the Space
    loads by Hub id) and a non-empty `space_dir` unless `overwrite`. Returns the files written."""
    for flag, name in (("--model", model), ("--compare", compare)):
        if name is not None and not is_hub_id(name):
            raise ValueError(
                f"{flag} {name!r} is not a Hub id: a Space loads its model from the Hub; upload the folder "
                "(python scripts/push_to_hub.py FOLDER --repo_id USER/NAME) and give its id, such as "
                "'user/casan-minilm-sst2'."
            )
    check_output_dir(space_dir, overwrite, flag="--overwrite_space_dir")
    requirements, sdk_version = space_requirements(), installed(SDK).version  # both before anything is written
    space = Path(space_dir)
    space.mkdir(parents=True, exist_ok=True)
    package = Path(__file__).resolve().parents[1]
    shutil.copytree(
        package, space / package.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True
    )
    # casan_hf.model_cards, which an install maps from the repository's model_cards/: what the wheel ships of it.
    cards = space / package.name / "model_cards"
    cards.mkdir(exist_ok=True)
    for name in ("__init__.py", TEMPLATE_NAME):
        shutil.copy(Path(model_cards.__file__).with_name(name), cards / name)
    (space / "app.py").write_text(APP.format(model=model, compare=compare or ""))
    (space / "requirements.txt").write_text("\n".join(requirements) + "\n")
    card_data = SpaceCardData(
        title=f"CASAN explorer: {model.split('/')[-1]}"[:60],
        sdk=SDK,
        sdk_version=sdk_version,
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
        app_file="app.py",
        models=[name for name in (model, compare) if name],
        tags=["casan", "attention", "interpretability"],
        emoji="🔍",
        colorFrom="blue",
        colorTo="green",
        pinned=False,
    )
    compare_line = f"\n\nCompared with [{compare}](https://huggingface.co/{compare}), side by side." if compare else ""
    body = README_BODY.format(model=model, compare_line=compare_line, version=metadata.version(PACKAGE))
    SpaceCard(f"---\n{card_data.to_yaml()}\n---\n\n{body}").save(space / "README.md")
    return sorted(str(path.relative_to(space)) for path in space.rglob("*") if path.is_file())


__all__ = ["space_requirements", "write_space"]
