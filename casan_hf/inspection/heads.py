"""Which head a checkpoint or a loaded model is, by the class name its config's `architectures` or its type gives:
CASAN's classes and their transformers twins of every family, the encoders' and the causal LMs'."""

from .. import families
from ..families import get_family


def inspected_families():
    """Every family whose checkpoints can be inspected: the encoders' and the causal LMs', read from the tables when
    asked, so that a family added to them counts."""
    return (*families.FAMILIES, *families.CAUSAL_FAMILIES)


def family_classes(family):
    """(class name, head) of each head the family is built with: CASAN's class and its transformers twin."""
    return [
        (name, head) for head in family.heads for name in (family.class_name(head), family.source_class_name(head))
    ]


def architecture_heads():
    """Class name -> head, for CASAN's classes and their transformers twins in every family: what a checkpoint's
    `architectures` may name."""
    return {name: head for family in inspected_families() for name, head in family_classes(family)}


def checkpoint_head(config):
    """The `Head` a checkpoint's `architectures` names (the base model when it names none), or a ValueError
    naming the architecture and the heads its family can be. Refuses model types outside CASAN's families (through
    `get_family`) first."""
    family = get_family(config.model_type)
    if not config.architectures:
        return next(head for head in family.heads if head.bare)
    heads = architecture_heads()
    if config.architectures[0] not in heads:
        shown = [name for name, _ in family_classes(family)]
        raise ValueError(
            f"Checkpoint architecture {config.architectures[0]!r} is not a head that can be inspected; "
            f"a {config.model_type} checkpoint can be one of {', '.join(shown)}."
        )
    return heads[config.architectures[0]]


def model_head(model):
    """The `Head` of a loaded model, from its class name (`CasanRobertaForMaskedLM`, `GPT2LMHeadModel`)."""
    return architecture_heads()[type(model).__name__]
