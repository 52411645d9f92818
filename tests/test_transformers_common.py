"""transformers' own model tests on CASAN: `ModelTesterMixin` (test_modeling_common.py) and `ConfigTester`
(test_configuration_common.py) of the installed release, run on BERT's six heads as the control and on CASAN's
six BERT heads for each context type, through a tester written as transformers' `BertModelTester`; likewise
ModernBERT's and DeBERTa-v2's six heads and CASAN's six heads of each (deep_global context). CASAN passes what the
source family passes and skips what it skips, for transformers' own reasons (docs/TESTS.md). Skipped, saying why,
when the release's tests are not fetched, except in CI, where `make test` and `make test-latest` fetch them."""

import os
import unittest
from contextlib import ExitStack
from unittest import mock

import pytest
import transformers
from transformers_common import load_common_tests, missing_common_tests

from casan_hf import CasanConfig, casan_class
from casan_hf.configuration_casan_deberta_v2 import CasanDebertaV2Config
from casan_hf.families import DEBERTA_V3_ATTENTION, HEADS, get_family


if missing_common_tests() is not None:  # skipped outside CI, where `make test` fetches them
    if os.environ.get("CI") == "true":
        pytest.fail(missing_common_tests(), pytrace=False)
    pytest.skip(missing_common_tests(), allow_module_level=True)
modeling_common, configuration_common = load_common_tests()
ModelTesterMixin = modeling_common.ModelTesterMixin


def source_classes(family):
    """transformers' class of each head of `family`, in the order of `HEADS` (`BertModel`, ...)."""
    return tuple(getattr(transformers, get_family(family).source_class_name(head)) for head in HEADS)


def casan_classes(family):
    """CASAN's class of each head of `family`, in the order of `HEADS` (`CasanModel`, ...)."""
    return tuple(casan_class(family, head.name) for head in HEADS)


class EncoderTester:
    """A tiny encoder and its inputs, as transformers' `BertModelTester` makes them."""

    batch_size = 13
    seq_length = 7
    is_training = True
    vocab_size = 99
    hidden_size = 32
    num_hidden_layers = 2
    num_attention_heads = 4
    intermediate_size = 37
    type_vocab_size = 16
    num_labels = 3
    num_choices = 4

    def __init__(self, parent, config_class, **options):
        self.parent = parent
        self.config_class = config_class
        self.options = options

    def get_config(self):
        return self.config_class(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            intermediate_size=self.intermediate_size,
            max_position_embeddings=512,
            initializer_range=0.02,
            **self.family_fields(),
            **self.options,
        )

    def family_fields(self):
        """The config fields of transformers' tester of the family (`BertModelTester`'s here) that others name
        otherwise or lack."""
        return dict(
            hidden_act="gelu",
            hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1,
            type_vocab_size=self.type_vocab_size,
        )

    def prepare_config_and_inputs_for_common(self):
        shape = [self.batch_size, self.seq_length]
        inputs = {
            "input_ids": modeling_common.ids_tensor(shape, self.vocab_size),
            "token_type_ids": modeling_common.ids_tensor(shape, self.type_vocab_size),
            "attention_mask": modeling_common.random_attention_mask(shape),
        }
        return self.get_config(), inputs


class BertCommonTest(ModelTesterMixin, unittest.TestCase):
    """The control: transformers' BERT, with the same tester."""

    config_class = transformers.BertConfig
    options = {}
    all_model_classes = source_classes("bert")

    def setUp(self):
        self.model_tester = EncoderTester(self, self.config_class, **self.options)
        self.config_tester = configuration_common.ConfigTester(self, config_class=self.config_class, hidden_size=37)

    def test_config(self):
        self.config_tester.run_common_tests()


class NamesCasanClasses:
    """Mixed into the tests of CASAN's heads, before the control they extend. transformers' tests find a class's head
    by its name in the auto classes' name tables (`MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES`, ...), which name only
    transformers' own classes: CASAN's are added under their model type (`casan_bert`) while the class's tests run."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.addClassCleanup(name_casan_classes(cls).close)


class CasanCommonTest(NamesCasanClasses, BertCommonTest):
    """CASAN's six BERT heads, in place of BERT's."""

    __test__ = False
    config_class = CasanConfig
    all_model_classes = casan_classes("bert")


def name_casan_classes(test_class):
    """Adds a test class's CASAN classes to the auto classes' name tables under their model type, until closed."""
    names = ExitStack()
    for head, model_class in zip(HEADS, test_class.all_model_classes, strict=True):
        class_names = getattr(transformers, head.auto_class)._model_mapping._model_mapping
        names.enter_context(mock.patch.dict(class_names, {test_class.config_class.model_type: model_class.__name__}))
    return names


class CasanGlobalCommonTest(CasanCommonTest):
    __test__ = True
    options = {"context_type": "global"}


class CasanDeepCommonTest(CasanCommonTest):
    __test__ = True
    options = {"context_type": "deep"}


class CasanDeepGlobalCommonTest(CasanCommonTest):
    __test__ = True
    options = {"context_type": "deep_global"}


# ModernBERT: transformers' own ModernBERT as the control, and CASAN's six ModernBERT heads with deep_global context
# beside it, through a tester written as transformers' `ModernBertModelTester` (its config fields; no token types).
class ModernBertTester(EncoderTester):
    def family_fields(self):
        return dict(pad_token_id=0, hidden_activation="gelu")

    def prepare_config_and_inputs_for_common(self):
        config, inputs = super().prepare_config_and_inputs_for_common()
        del inputs["token_type_ids"]
        return config, inputs


class ModernBertCommonTest(BertCommonTest):
    """The control of the ModernBERT family: transformers' ModernBERT, with its tester."""

    config_class = transformers.ModernBertConfig
    all_model_classes = source_classes("modernbert")

    def setUp(self):
        super().setUp()
        self.model_tester = ModernBertTester(self, self.config_class, **self.options)


class CasanModernBertCommonTest(NamesCasanClasses, ModernBertCommonTest):
    """CASAN's six ModernBERT heads (deep_global context), added to the auto classes' name tables as BERT's are."""

    all_model_classes = casan_classes("modernbert")
    config_class = all_model_classes[0].config_class
    options = {"context_type": "deep_global"}


def test_the_common_tests_are_the_installed_releases():
    assert modeling_common.__file__.endswith(f"{transformers.__version__}/test_modeling_common.py")


# DeBERTa-v2: transformers' own DeBERTa-v2 with v3's relative attention as the control, and CASAN's six DeBERTa
# heads with deep_global context beside it.


class DebertaV2CommonTest(BertCommonTest):
    """The control of the DeBERTa-v2 family: transformers' DeBERTa-v2, with the same tester."""

    config_class = transformers.DebertaV2Config
    options = DEBERTA_V3_ATTENTION
    all_model_classes = source_classes("deberta-v2")

    @unittest.skip(
        "transformers' DeBERTa-v2 passes the relative embeddings as a keyword: reentrant checkpointing misses them"
    )
    def test_training_gradient_checkpointing_use_reentrant_true(self):
        pass


class CasanDebertaV2CommonTest(NamesCasanClasses, DebertaV2CommonTest):
    """CASAN's six DeBERTa-v2 heads (deep_global context), added to the auto classes' name tables as BERT's are."""

    config_class = CasanDebertaV2Config
    options = {**DEBERTA_V3_ATTENTION, "context_type": "deep_global"}
    all_model_classes = casan_classes("deberta-v2")

    def test_training_gradient_checkpointing_use_reentrant_true(self):
        """Runs here, where the control skips it: CASAN's layers take the relative embeddings positionally."""
        super(BertCommonTest, self).test_training_gradient_checkpointing_use_reentrant_true()
