"""A family is a row of its table: a made-up BERT-style family, CamemBERT (RoBERTa's layout under transformers'
`Camembert` modules), added as docs/CODE.md's "new family" says a real one is (a row of `FAMILIES`, its config
class, its `PreTrainedModel` and six classes written out as RoBERTa's are, each in `modeling_casan.FAMILY_CLASSES`,
from which `MODEL_CLASSES` is gathered as at import), runs through what reads the tables with nothing else changed:
`casan_class`, `casan_twin` (transformers' outputs and loss at context_type="none", other outputs with a context),
`from_pretrained` of a CamembertModel checkpoint into every head and of another family's refused, save and reload,
the converter script, the config's `auto_map`, the auto classes, the new masked-LM head's initialisation (from the
family's `family_modules`), and the checks tests/test_model_classes.py makes of each class."""

import dataclasses
import inspect
import json
import sys

import pytest
import torch
import transformers
from conftest import load_script
from glue_helpers import make_tiny_source, read_json
from test_model_classes import class_line
from tiny_models import (
    assert_outputs_close,
    assert_same_weights,
    comparable_outputs,
    head_inputs,
    padded_batch,
    tiny_config,
    tiny_source_config,
)
from transformers.models.camembert.modeling_camembert import (
    CamembertClassificationHead,
    CamembertEmbeddings,
    CamembertLMHead,
    CamembertPooler,
)

import casan_hf
from casan_hf import families, modeling_casan, modeling_casan_auto
from casan_hf.compat import dataclass_config
from casan_hf.configuration_casan import CasanConfig
from casan_hf.context import CONTEXT_MIXER_MODULE
from casan_hf.families import HEADS, ROBERTA_SETTINGS, Family, get_family
from casan_hf.modeling_casan import (
    CasanForMultipleChoice,
    CasanForQuestionAnswering,
    CasanForSequenceClassification,
    CasanForTokenClassification,
    CasanModel,
    CasanPreTrainedModel,
    CasanRobertaForMaskedLM,
    FamilyModules,
)
from casan_hf.modeling_casan_auto import casan_class, casan_twin


# The row, as `families.FAMILIES` would hold it: RoBERTa's positions (2 more than the longest input) and byte-level
# BPE tokenizer.
CAMEMBERT = Family("camembert", "Camembert", "Camembert", "roberta", **ROBERTA_SETTINGS)


# As `CasanRobertaConfig` in configuration_casan.py.
@dataclass_config
class CasanCamembertConfig(CasanConfig):
    r"""
    [`CasanConfig`] for CamemBERT checkpoints: `CamembertConfig`'s defaults (its vocabulary and special tokens)
    and the CASAN options.
    """

    model_type = "casan_camembert"

    vocab_size: int = 30522
    pad_token_id: int | None = 1
    bos_token_id: int | None = 0
    eos_token_id: int | list[int] | None = 2


# As RoBERTa's classes in modeling_casan.py; masked LM as XLM-RoBERTa's, RoBERTa's class (`lm_head`) under the
# family's `PreTrainedModel`, which names the family's `lm_head` module.
class CasanCamembertPreTrainedModel(CasanPreTrainedModel):
    """Loads CamemBERT checkpoints, as `CamembertPreTrainedModel`."""

    family = CAMEMBERT
    family_modules = FamilyModules(
        CamembertEmbeddings, CamembertPooler, CamembertClassificationHead, None, CamembertLMHead
    )
    config_class = CasanCamembertConfig
    config: CasanCamembertConfig
    base_model_prefix = "roberta"
    _no_split_modules = ["CamembertEmbeddings", "CasanLayer"]


class CasanCamembertModel(CasanCamembertPreTrainedModel, CasanModel):
    """`CasanModel` for CamemBERT checkpoints, as `CamembertModel`."""


class CasanCamembertForSequenceClassification(CasanCamembertPreTrainedModel, CasanForSequenceClassification):
    """`CasanForSequenceClassification` for CamemBERT checkpoints, as `CamembertForSequenceClassification`."""


class CasanCamembertForTokenClassification(CasanCamembertPreTrainedModel, CasanForTokenClassification):
    """`CasanForTokenClassification` for CamemBERT checkpoints, as `CamembertForTokenClassification`."""


class CasanCamembertForQuestionAnswering(CasanCamembertPreTrainedModel, CasanForQuestionAnswering):
    """`CasanForQuestionAnswering` for CamemBERT checkpoints, as `CamembertForQuestionAnswering`."""


class CasanCamembertForMultipleChoice(CasanCamembertPreTrainedModel, CasanForMultipleChoice):
    """`CasanForMultipleChoice` for CamemBERT checkpoints, as `CamembertForMultipleChoice`."""


class CasanCamembertForMaskedLM(CasanCamembertPreTrainedModel, CasanRobertaForMaskedLM):
    """`CasanRobertaForMaskedLM` (CamemBERT's head is RoBERTa's, `lm_head`) for CamemBERT checkpoints, as
    `CamembertForMaskedLM`."""


CAMEMBERT_CLASSES = (
    CasanCamembertModel,
    CasanCamembertForSequenceClassification,
    CasanCamembertForTokenClassification,
    CasanCamembertForQuestionAnswering,
    CasanCamembertForMultipleChoice,
    CasanCamembertForMaskedLM,
)


@pytest.fixture
def made_up_family(monkeypatch):
    """The made-up family in the tables, as a real row would be: its row last in `FAMILIES`, its classes in
    modeling_casan.py (the module's names and `FAMILY_CLASSES`), `MODEL_CLASSES` gathered from those as at import,
    and its config class in `FAMILY_CONFIGS`. `casan_twin` and `from_pretrained`'s error read `FAMILIES` as their
    files imported it, so their names are patched too (a real row is in the table before those imports)."""
    monkeypatch.setattr(families, "FAMILIES", (*families.FAMILIES, CAMEMBERT))
    monkeypatch.setattr(modeling_casan_auto, "FAMILIES", families.FAMILIES)
    monkeypatch.setattr(modeling_casan, "FAMILIES", families.FAMILIES)
    for model_class in CAMEMBERT_CLASSES:
        monkeypatch.setattr(modeling_casan, model_class.__name__, model_class, raising=False)
        monkeypatch.setitem(modeling_casan.FAMILY_CLASSES, (CAMEMBERT.name, model_class.casan_head.name), model_class)
    monkeypatch.setattr(modeling_casan_auto, "MODEL_CLASSES", modeling_casan_auto.model_classes())
    monkeypatch.setitem(modeling_casan_auto.FAMILY_CONFIGS, CAMEMBERT.name, CasanCamembertConfig)


def test_the_made_up_family_has_a_class_for_every_head_that_agrees_with_its_row(made_up_family):
    """tests/test_model_classes.py's checks of one class (`test_every_class_agrees_with_its_row`), for the made-up
    family's: its row's name, family, head, config class, model type, prefix, `auto_map` entry, the transformers
    class it mirrors, its family's `PreTrainedModel` and BERT's class of its head."""
    assert get_family("camembert") is CAMEMBERT and get_family("casan_camembert") is CAMEMBERT
    rows = [row for row in modeling_casan_auto.MODEL_CLASSES if row[0] == "camembert"]
    assert rows == [("camembert", head.name) for head in HEADS]
    assert [casan_class("camembert", head.name) for head in HEADS] == list(CAMEMBERT_CLASSES)
    assert modeling_casan_auto.FAMILY_CONFIGS["camembert"] is CasanCamembertConfig
    assert CasanCamembertConfig.__name__ == CAMEMBERT.config_class_name
    assert CasanCamembertConfig.model_type == CAMEMBERT.model_type
    # The family's own defaults, as RoBERTa's config takes RobertaConfig's.
    defaults, source_defaults = CasanCamembertConfig(), transformers.CamembertConfig()
    for name in ("vocab_size", "pad_token_id", "bos_token_id", "eos_token_id", "max_position_embeddings"):
        assert getattr(defaults, name) == getattr(source_defaults, name), name
    for head in HEADS:
        model_class = casan_class(CAMEMBERT, head.name)
        name = CAMEMBERT.class_name(head)
        assert model_class.__qualname__ == name and getattr(modeling_casan, name) is model_class
        assert model_class.family is CAMEMBERT and inspect.getattr_static(model_class, "casan_head") is head
        assert model_class.config_class is CasanCamembertConfig
        assert model_class.base_model_prefix == CAMEMBERT.base_model_prefix
        module_name, class_name = CAMEMBERT.auto_map()[head.auto_class].split(".")
        assert (module_name, class_name) == ("modeling_casan", name)
        mirrored = getattr(transformers, CAMEMBERT.source_class_name(head))
        assert f"`{mirrored.__name__}`" in model_class.__dict__["__doc__"], name
        assert mirrored.base_model_prefix == model_class.base_model_prefix
        assert mirrored.config_class.model_type == CAMEMBERT.name
        assert issubclass(model_class, CasanCamembertPreTrainedModel), name
        assert model_class._no_split_modules == [model_class.family_modules.embeddings.__name__, "CasanLayer"]
        assert issubclass(model_class, modeling_casan_auto.MODEL_CLASSES[("bert", head.name)]), name
    # `test_every_row_of_the_tables_has_its_class_in_table_order` and `test_no_model_class_stands_outside_the_tables`,
    # of the module the classes are written in: each its own `class` statement, in the order of `HEADS`, and no
    # model class beside them and the family's `PreTrainedModel`.
    module = sys.modules[__name__]
    lines = [class_line(module, CAMEMBERT.class_name(head)) for head in HEADS]
    assert None not in lines and lines == sorted(lines)
    defined = {
        value
        for value in vars(module).values()
        if inspect.isclass(value) and issubclass(value, CasanPreTrainedModel) and value.__module__ == __name__
    }
    assert defined == {*CAMEMBERT_CLASSES, CasanCamembertPreTrainedModel}
    assert CasanCamembertPreTrainedModel.family is CAMEMBERT
    assert CasanCamembertPreTrainedModel.config_class is CasanCamembertConfig
    assert CasanCamembertPreTrainedModel.base_model_prefix == CAMEMBERT.base_model_prefix


def test_the_made_up_family_s_config_names_its_classes_in_auto_map(made_up_family):
    config = tiny_config("camembert")
    assert type(config) is CasanCamembertConfig
    assert config.auto_map == {
        "AutoConfig": "configuration_casan.CasanCamembertConfig",
        **{head.auto_class: f"modeling_casan.CasanCamembert{head.suffix}" for head in HEADS},
    }
    # A config.json of the family's own converts: the model type is the class's, the auto_map the row's.
    converted = CasanCamembertConfig.from_dict({**tiny_source_config("camembert").to_dict(), "context_type": "none"})
    assert converted.model_type == "casan_camembert" and converted.auto_map == config.auto_map


@pytest.mark.parametrize("head", HEADS, ids=[head.name for head in HEADS])
def test_casan_twin_of_a_camembert_model_is_that_model_at_none(made_up_family, head):
    """As tests/test_bert_reference.py's twin test of every real family: transformers' own class of the made-up
    family, the twin of it has its weights and at "none" its exact outputs and loss (the same arithmetic on weights
    copied in memory); a context kind runs and moves the logits or hidden states (not the loss, which rounds a small
    move away: a random head's logits spread little)."""
    torch.manual_seed(0)
    source_class = getattr(transformers, CAMEMBERT.source_class_name(head))
    source = source_class(tiny_source_config("camembert", num_labels=2)).eval()
    inputs = head_inputs(casan_class(CAMEMBERT, head.name), *padded_batch([9, 5, 7], pad_token_id=1))
    twin = casan_twin(source, context_type="none")
    assert type(twin) is casan_class(CAMEMBERT, head.name) and not twin.training
    assert twin.config.model_type == "casan_camembert"
    with torch.no_grad():
        expected, actual = comparable_outputs(source(**inputs)), comparable_outputs(twin(**inputs))
    assert expected.keys() == actual.keys() and ("loss" in expected) == (not head.bare)
    for name in expected:
        assert torch.equal(actual[name], expected[name]), name
    context = casan_twin(source, context_type="deep_global", gate_bias_init=0.0)
    source_weights = source.state_dict()
    for name, tensor in context.state_dict().items():
        assert CONTEXT_MIXER_MODULE in name or torch.equal(tensor, source_weights[name]), name
    with torch.no_grad():
        moved = comparable_outputs(context.eval()(**inputs))
    assert all(torch.isfinite(output).all() for output in moved.values())
    for name in expected.keys() - {"loss"}:
        assert not torch.equal(moved[name], expected[name]), name


def test_a_camembert_checkpoint_converts_into_every_head_and_reloads(made_up_family, tmp_path):
    """The converter's path: `from_pretrained` of a saved tiny `CamembertModel` folder into each head's CASAN
    class loads every source weight (only the context, the pooling and the head are new), and the CASAN model
    saved and loaded again has the same weights and outputs (to `OUTPUT_TOLERANCE`), with the row's `auto_map`."""
    torch.manual_seed(0)
    source_folder = tmp_path / "camembert"
    config = tiny_source_config("camembert", **CAMEMBERT.tiny_checkpoint_config)
    source = transformers.CamembertModel(config).eval()
    source.save_pretrained(source_folder)
    input_ids, attention_mask = padded_batch([9, 5, 7], pad_token_id=config.pad_token_id)
    with torch.no_grad():
        reference = source(input_ids, attention_mask=attention_mask).last_hidden_state
    # A checkpoint of another family is refused, the families named; and a CamemBERT one by another family's class.
    with pytest.raises(ValueError, match="'camembert'; CASAN roberta models load 'roberta' or 'casan_roberta'"):
        casan_class("roberta", "base").from_pretrained(source_folder)
    transformers.RobertaModel(tiny_source_config("roberta")).save_pretrained(tmp_path / "roberta")
    with pytest.raises(ValueError, match=r"'roberta'; CASAN camembert models .* \('bert', .*, 'camembert'\)"):
        casan_class("camembert", "base").from_pretrained(tmp_path / "roberta")
    for head in HEADS:
        model_class = casan_class("camembert", head.name)
        casan, info = model_class.from_pretrained(source_folder, context_type="deep_global", output_loading_info=True)
        casan.eval()
        assert type(casan) is model_class and casan.config.model_type == "casan_camembert" and casan.name_or_path == ""
        prefix = f"{CAMEMBERT.base_model_prefix}."  # the base model's own keys have none
        missing_in_encoder = [
            key for key in info["missing_keys"] if key.removeprefix(prefix).startswith(("embeddings.", "encoder."))
        ]
        assert missing_in_encoder and all(CONTEXT_MIXER_MODULE in key for key in missing_in_encoder), head.name
        assert not info["mismatched_keys"]
        # Only a head whose "cls" vector is the pooler's reads it (none of RoBERTa's layout: multiple choice).
        unexpected = {key.removeprefix(prefix) for key in info["unexpected_keys"]}
        assert unexpected <= {"pooler.dense.weight", "pooler.dense.bias"}, (head.name, unexpected)
        inputs = head_inputs(model_class, input_ids, attention_mask)
        with torch.no_grad():
            outputs = casan(**inputs)
        if head.bare:  # the context moves the converted encoder a little from its source
            real = attention_mask.bool()
            diff = outputs.last_hidden_state[real] - reference[real]
            assert 0 < (diff.norm() / reference[real].norm()).item() <= 0.05
        saved = tmp_path / head.name
        casan.save_pretrained(saved)
        # transformers writes the saved class's own entry and the config's as the files they are written in (this
        # module here, modeling_casan.py and configuration_casan.py for a real row); the rest are the row's.
        here = __name__.rsplit(".", 1)[-1]
        assert json.loads((saved / "config.json").read_text())["auto_map"] == {
            **CAMEMBERT.auto_map(),
            "AutoConfig": f"{here}.CasanCamembertConfig",
            head.auto_class: f"{here}.{model_class.__name__}",
        }
        reloaded, info = model_class.from_pretrained(saved, output_loading_info=True)
        assert not any(info.values()), info
        assert reloaded.config.auto_map == CAMEMBERT.auto_map()
        assert reloaded.config.model_type == "casan_camembert"
        assert_same_weights(reloaded, casan)
        with torch.no_grad():
            assert_outputs_close(comparable_outputs(reloaded.eval()(**inputs)), comparable_outputs(outputs), head.name)


def test_the_converter_writes_a_camembert_folder(made_up_family, minilm_path, glue_dir, tmp_path):
    """scripts/convert_bert_to_casan.py on a tiny CamemBERT checkpoint made as the scripts' tests make every
    family's (the row's `tiny_checkpoint_config`, `tiny_checkpoint_tokenizer` and `token_id_fields`): a Hub folder
    of the family's CASAN class, with its tokenizer, that loads with the same outputs."""
    source = make_tiny_source(tmp_path / "camembert", "camembert", minilm_path, glue_dir)
    assert read_json(tmp_path / "camembert" / "config.json")["max_position_embeddings"] == 66
    output = tmp_path / "casan"
    load_script("convert_bert_to_casan").main(
        ["--model_name_or_path", source, "--output_dir", str(output), "--head", "sequence-classification",
         "--num_labels", "3", "--context_type", "deep"]
    )  # fmt: skip
    config = read_json(output / "config.json")
    assert config["model_type"] == "casan_camembert" and config["context_type"] == "deep"
    assert config["architectures"] == ["CasanCamembertForSequenceClassification"]
    model = casan_class("camembert", "sequence-classification").from_pretrained(output).eval()
    assert model.config.pad_token_id == 1 and model.num_labels == 3
    tokenizer = transformers.AutoTokenizer.from_pretrained(output)
    batch = tokenizer(["the film was great .", "it was dull"], padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits
    assert logits.shape == (2, 3) and torch.isfinite(logits).all()


@pytest.mark.parametrize("family", ["roberta", "camembert"])
def test_a_new_masked_lm_head_s_bias_starts_at_zero(made_up_family, family):
    """What a checkpoint lacks is initialised by `_init_weights`, module by module, as the family's own
    `PreTrainedModel` does: the masked-LM head's bias at zero (`CamembertPreTrainedModel` zeros
    `CamembertLMHead`'s, as RoBERTa's does `RobertaLMHead`'s)."""
    model = casan_class(family, "masked-lm")(tiny_config(family))
    with torch.no_grad():
        model.lm_head.bias.fill_(1.0)
    model._init_weights(model.lm_head)
    assert torch.equal(model.lm_head.bias, torch.zeros_like(model.lm_head.bias))


@pytest.fixture
def registered(made_up_family, monkeypatch):
    """The made-up family registered with transformers' auto classes by what `casan_hf/__init__.py` calls at
    import (`_register_auto_classes`, over the package's tables), undone afterwards: the registries' added entries
    and each class's `_auto_class`."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    monkeypatch.setattr(CONFIG_MAPPING, "_extra_content", dict(CONFIG_MAPPING._extra_content))
    for auto_class in {head.auto_class for head in HEADS} | {"AutoModelForSeq2SeqLM"}:
        mapping = getattr(transformers, auto_class)._model_mapping
        monkeypatch.setattr(mapping, "_extra_content", dict(mapping._extra_content))
    for registered_class in (CasanCamembertConfig, *CAMEMBERT_CLASSES):
        monkeypatch.setattr(registered_class, "_auto_class", None)
    monkeypatch.setattr(casan_hf, "FAMILIES", families.FAMILIES)
    monkeypatch.setattr(casan_hf, "MODEL_CLASSES", modeling_casan_auto.MODEL_CLASSES)
    casan_hf._register_auto_classes()


@pytest.mark.parametrize("head", HEADS, ids=[head.name for head in HEADS])
def test_the_auto_classes_load_a_saved_camembert_folder_as_its_class(registered, head, tmp_path):
    torch.manual_seed(0)
    model_class = casan_class("camembert", head.name)
    model = model_class(tiny_config("camembert", num_labels=2)).eval()
    model.save_pretrained(tmp_path)
    assert type(transformers.AutoConfig.from_pretrained(tmp_path)) is CasanCamembertConfig
    loaded = getattr(transformers, head.auto_class).from_pretrained(tmp_path)
    assert type(loaded) is model_class
    inputs = head_inputs(model_class, *padded_batch([9, 5, 7], pad_token_id=1))
    assert_same_weights(loaded, model)
    with torch.no_grad():
        assert_outputs_close(comparable_outputs(loaded.eval()(**inputs)), comparable_outputs(model(**inputs)))


def test_the_tables_are_as_they_were_without_the_fixture():
    """Nothing of the made-up family stays in the tables, modeling_casan.py or transformers' auto classes."""
    assert "camembert" not in [family.name for family in families.FAMILIES]
    assert ("camembert", "base") not in modeling_casan_auto.MODEL_CLASSES
    assert "camembert" not in modeling_casan_auto.FAMILY_CONFIGS
    assert not hasattr(modeling_casan, "CasanCamembertModel")
    assert "casan_camembert" not in transformers.models.auto.configuration_auto.CONFIG_MAPPING
    for head in HEADS:
        assert CasanCamembertConfig not in getattr(transformers, head.auto_class)._model_mapping._extra_content
    assert dataclasses.is_dataclass(CasanCamembertConfig)
