"""`python -m casan_hf.cli.serve FOLDER [options of transformers serve]`: transformers' OpenAI-compatible server
(`transformers serve`: /v1/chat/completions, streamed or not, /v1/completions, /v1/models) for a CASAN causal LM.

`transformers serve FOLDER` alone cannot load a custom-code checkpoint, `--trust-remote-code` or not: its model
manager looks the model's class up by name in the transformers package (`getattr(transformers,
config.architectures[0])`, transformers 5.23 to 5.25), where no custom-code class is. This entry point puts casan-hf's
causal classes there when it is imported, then runs transformers' own `serve` command, its options and behaviour
unchanged. The import is where: transformers 5.25 loads the model in a process it starts with `spawn`, which imports
this module again (as `__mp_main__`) and never calls `main`.
docs/CAUSAL_TOOLS.md, "Serving", says what is tested."""

import sys

import transformers

from casan_hf import CAUSAL_FAMILIES, casan_class


def make_casan_classes_resolvable():
    """Every CASAN causal class (each family's base model, language model and classifier) as an attribute of
    `transformers`, under the name a saved config's `architectures` gives it."""
    for family in CAUSAL_FAMILIES:
        for head in family.heads:
            model_class = casan_class(family.name, head.name)
            setattr(transformers, model_class.__name__, model_class)


def main(argv=None):
    """Runs `transformers serve` with `argv` (the command line's arguments by default), the CASAN classes
    resolvable."""
    from transformers.cli.transformers import app

    app(["serve", *(sys.argv[1:] if argv is None else argv)], prog_name="python -m casan_hf.cli.serve")


make_casan_classes_resolvable()

if __name__ == "__main__":
    main()
