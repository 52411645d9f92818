"""The model classes are written out one by one in their family's modeling file (`Family.modeling_module`:
modeling_casan.py for the BERT-style families), and `FAMILIES` x `HEADS` stays their one source of truth: every
row has its class, in table order in its file, with the row's name, model type, config class, base model prefix
and `auto_map` entry, mirroring the transformers class of the row; there is no class beside them."""

import importlib
import inspect
import re

import transformers

from casan_hf import FAMILY_CONFIGS
from casan_hf.families import CAUSAL_FAMILIES, FAMILIES
from casan_hf.modeling_casan import CasanPreTrainedModel
from casan_hf.modeling_casan_auto import MODEL_CLASSES


def modeling_module(family):
    return importlib.import_module(f"casan_hf.{family.modeling_module}")


ALL_FAMILIES = (*FAMILIES, *CAUSAL_FAMILIES)
MODULES = {family.modeling_module: modeling_module(family) for family in ALL_FAMILIES}


def family_base(family):
    """The family's `PreTrainedModel`: `CasanPreTrainedModel` for BERT, `CasanRobertaPreTrainedModel`, ..."""
    return getattr(modeling_module(family), f"Casan{family.class_prefix}PreTrainedModel")


def class_line(module, name):
    """The line of `module`'s file that defines class `name` (a grep finds it), or None."""
    match = re.search(rf"^class {name}\(", inspect.getsource(module), flags=re.MULTILINE)
    return None if match is None else inspect.getsource(module).count("\n", 0, match.start()) + 1


def test_every_row_of_the_tables_has_its_class_in_table_order():
    rows = [(family.name, head.name) for family in ALL_FAMILIES for head in family.heads]
    assert list(MODEL_CLASSES) == rows
    names = [family.class_name(head) for family in ALL_FAMILIES for head in family.heads]
    assert [model_class.__name__ for model_class in MODEL_CLASSES.values()] == names
    for module_name, module in MODULES.items():
        in_file = [
            family.class_name(head)
            for family in ALL_FAMILIES
            if family.modeling_module == module_name
            for head in family.heads
        ]
        lines = [class_line(module, name) for name in in_file]
        assert None not in lines, [name for name, line in zip(in_file, lines, strict=True) if line is None]
        assert lines == sorted(lines), f"the classes of {module_name}.py are written in the order of FAMILIES x HEADS"
        assert dict(module.FAMILY_CLASSES) == {
            key: value for key, value in MODEL_CLASSES.items() if value.__module__ == module.__name__
        }


def test_every_class_agrees_with_its_row():
    for family in ALL_FAMILIES:
        module = modeling_module(family)
        for head in family.heads:
            model_class = MODEL_CLASSES[(family.name, head.name)]
            name = family.class_name(head)
            assert model_class.__qualname__ == name and model_class.__module__ == module.__name__
            assert getattr(module, name) is model_class
            # The row is a plain class attribute (no descriptor), under a name no family's module has.
            assert model_class.family is family and inspect.getattr_static(model_class, "casan_head") is head
            config_class = model_class.config_class
            assert config_class is FAMILY_CONFIGS[family.name] and config_class.__name__ == family.config_class_name
            assert config_class.model_type == family.model_type
            assert model_class.base_model_prefix == family.base_model_prefix
            module_name, class_name = family.auto_map()[head.auto_class].split(".")
            assert (module_name, class_name) == (family.modeling_module, name)
            # The transformers class it mirrors: named in its docstring, with the same prefix and model type.
            mirrored = getattr(transformers, family.source_class_name(head))
            assert f"`{mirrored.__name__}`" in model_class.__dict__["__doc__"], name
            assert mirrored.base_model_prefix == model_class.base_model_prefix
            assert mirrored.config_class.model_type == family.name
            assert issubclass(model_class, family_base(family)), name
            if model_class.family_modules is not None:
                # A BERT-style family: the family's PreTrainedModel over BERT's class of the head.
                assert model_class._no_split_modules == [model_class.family_modules.embeddings.__name__, "CasanLayer"]
                assert issubclass(model_class, MODEL_CLASSES[("bert", head.name)]), name


def test_no_model_class_stands_outside_the_tables():
    for module_name, module in MODULES.items():
        source = inspect.getsource(module)
        defined = {
            value
            for value in vars(module).values()
            if inspect.isclass(value)
            and issubclass(value, CasanPreTrainedModel)
            and value.__module__ == module.__name__
        }
        families = [family for family in ALL_FAMILIES if family.modeling_module == module_name]
        family_bases = {family_base(family) for family in families}
        # what the file's families' PreTrainedModels share (the causal families' `CasanCausalPreTrainedModel`)
        shared = {base for family_class in family_bases for base in family_class.__bases__ if base in defined}
        in_tables = {MODEL_CLASSES[(family.name, head.name)] for family in families for head in family.heads}
        assert defined == in_tables | family_bases | shared
        for family_class in family_bases - {CasanPreTrainedModel}:
            family = family_class.family
            assert family_class.config_class is FAMILY_CONFIGS[family.name], family_class
            assert family_class.base_model_prefix == family.base_model_prefix, family_class
        # Nothing is made at import time: each class has its `class` statement, and no name is written into globals().
        assert all(class_line(module, model_class.__name__) for model_class in defined) and "globals()" not in source
