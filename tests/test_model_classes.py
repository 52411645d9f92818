"""The model classes are written out one by one in modeling_casan.py, and `FAMILIES` x `HEADS` stays their one
source of truth: every row has its class, in table order, with the row's name, model type, config class, base
model prefix and `auto_map` entry, mirroring the transformers class of the row; there is no class beside them."""

import inspect
import re

import transformers

from casan_hf import FAMILY_CONFIGS, modeling_casan
from casan_hf.families import FAMILIES, HEADS
from casan_hf.modeling_casan import FAMILY_MODULES, MODEL_CLASSES, CasanPreTrainedModel


SOURCE = inspect.getsource(modeling_casan)


def family_base(family):
    """The family's `PreTrainedModel`: `CasanPreTrainedModel` for BERT, `CasanRobertaPreTrainedModel`, ..."""
    return getattr(modeling_casan, f"Casan{family.class_prefix}PreTrainedModel")


def class_line(name):
    """The line of modeling_casan.py that defines class `name` (a grep finds it), or None."""
    match = re.search(rf"^class {name}\(", SOURCE, flags=re.MULTILINE)
    return None if match is None else SOURCE.count("\n", 0, match.start()) + 1


def test_every_row_of_the_tables_has_its_class_in_table_order():
    rows = [(family.name, head.name) for family in FAMILIES for head in HEADS]
    assert list(MODEL_CLASSES) == rows
    names = [family.class_name(head) for family in FAMILIES for head in HEADS]
    assert [model_class.__name__ for model_class in MODEL_CLASSES.values()] == names
    lines = [class_line(name) for name in names]
    assert None not in lines, [name for name, line in zip(names, lines, strict=True) if line is None]
    assert lines == sorted(lines), "the classes are written in the order of FAMILIES x HEADS"


def test_every_class_agrees_with_its_row():
    for family in FAMILIES:
        for head in HEADS:
            model_class = MODEL_CLASSES[(family.name, head.name)]
            name = family.class_name(head)
            assert model_class.__qualname__ == name and model_class.__module__ == modeling_casan.__name__
            assert getattr(modeling_casan, name) is model_class
            assert model_class.family is family and model_class.head is head
            config_class = model_class.config_class
            assert config_class is FAMILY_CONFIGS[family.name] and config_class.__name__ == family.config_class_name
            assert config_class.model_type == family.model_type
            assert model_class.base_model_prefix == family.base_model_prefix
            assert model_class._no_split_modules == [FAMILY_MODULES[family.name].embeddings.__name__, "CasanLayer"]
            module_name, class_name = family.auto_map()[head.auto_class].split(".")
            assert (module_name, class_name) == ("modeling_casan", name)
            # The transformers class it mirrors: named in its docstring, with the same prefix and model type.
            mirrored = getattr(transformers, family.source_class_name(head))
            assert f"`{mirrored.__name__}`" in model_class.__dict__["__doc__"], name
            assert mirrored.base_model_prefix == model_class.base_model_prefix
            assert mirrored.config_class.model_type == family.name
            # Written out as the family's PreTrainedModel over BERT's class of the head.
            assert issubclass(model_class, family_base(family)), name
            assert issubclass(model_class, MODEL_CLASSES[("bert", head.name)]), name


def test_no_model_class_stands_outside_the_tables():
    defined = {
        value
        for value in vars(modeling_casan).values()
        if inspect.isclass(value)
        and issubclass(value, CasanPreTrainedModel)
        and value.__module__ == modeling_casan.__name__
    }
    family_bases = {family_base(family) for family in FAMILIES}
    assert defined == set(MODEL_CLASSES.values()) | family_bases
    for family_class in family_bases - {CasanPreTrainedModel}:
        family = family_class.family
        assert family_class.config_class is FAMILY_CONFIGS[family.name], family_class
        assert family_class.base_model_prefix == family.base_model_prefix, family_class
    # Nothing is made at import time: each class has its `class` statement, and no name is written into globals().
    assert all(class_line(model_class.__name__) for model_class in defined) and "globals()" not in SOURCE
