"""The sentence-transformers pipeline of a source model (pooling, normalisation), copied beside a converted encoder."""

import json
import os


# The files of a sentence-transformers model beside its encoder; each module folder comes with modules.json.
SENTENCE_TRANSFORMERS_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")


def sentence_transformers_pipeline(source):
    """The files and folders of the sentence-transformers pipeline of the model in `source` (a local folder or
    Hub id) beyond its encoder: `modules.json`, its settings, and the folders of the modules after the encoder
    (pooling, normalisation). A ValueError if `source` is no sentence-transformers model of that layout."""
    if not os.path.isdir(source):
        from huggingface_hub import snapshot_download

        # modules.json first: it names the folders to fetch, and nothing else of the repository is needed.
        listing = snapshot_download(source, allow_patterns=["modules.json"])
        folders = [f"{module['path']}/*" for module in _read_modules(listing)[1:]]
        source = snapshot_download(source, allow_patterns=[*SENTENCE_TRANSFORMERS_FILES, *folders])
    modules_file = os.path.join(source, "modules.json")
    modules = _read_modules(source)
    encoder = modules[0] if modules else {}
    # sentence-transformers names the class by its module path, which moved in version 6
    # (`sentence_transformers.models.Transformer`, `sentence_transformers.base.modules.transformer.Transformer`).
    if encoder.get("type", "").rpartition(".")[2] != "Transformer" or encoder.get("path") != "":
        raise ValueError(
            f"{modules_file!r} must start with the Transformer module at path ''; it starts with {encoder}."
        )
    paths = [os.path.join(source, name) for name in SENTENCE_TRANSFORMERS_FILES]
    paths = [path for path in paths if os.path.isfile(path)]
    for module in modules[1:]:
        folder = os.path.join(source, module["path"])
        if os.path.isdir(folder):
            paths.append(folder)
        elif not module["type"].endswith(".Normalize"):  # normalisation has no files; every other module has
            raise ValueError(f"{modules_file!r} lists the module folder {module['path']!r}, which {source!r} lacks.")
    return paths


def _read_modules(folder):
    path = os.path.join(folder, "modules.json")
    if not os.path.isfile(path):
        raise ValueError(f"{folder!r} is not a sentence-transformers model: it has no modules.json.")
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
