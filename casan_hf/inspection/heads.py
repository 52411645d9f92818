"""Which head a checkpoint or a loaded model is, by the class name its config's `architectures` or its type gives:
CASAN's classes and their transformers twins of every family."""

from .. import families
from ..families import get_family


def architecture_heads():
    """Class name -> head, for CASAN's classes and their transformers twins in every family: what a checkpoint's
    `architectures` may name. Read from the tables when asked, so that a head or family added to them counts."""
    return {
        name: head
        for family in families.FAMILIES
        for head in families.HEADS
        for name in (family.class_name(head), family.source_class_name(head))
    }


def checkpoint_head(config):
    """The `Head` a checkpoint's `architectures` names (the base model when it names none), or a ValueError
    naming the architecture and the heads that can be inspected. Refuses model types outside CASAN's families
    (through `get_family`), and the causal families, first."""
    family = get_family(config.model_type)
    if family.causal:
        raise ValueError(
            f"A {config.model_type} checkpoint is a causal language model, whose gates and attention cannot be "
            f"inspected yet; the encoders' can ({', '.join(family.name for family in families.FAMILIES)})."
        )
    if not config.architectures:
        return next(head for head in families.HEADS if head.bare)
    heads = architecture_heads()
    if config.architectures[0] not in heads:
        shown = [name for head in families.HEADS for name in (family.class_name(head), family.source_class_name(head))]
        raise ValueError(
            f"Checkpoint architecture {config.architectures[0]!r} is not a head that can be inspected; "
            f"a {config.model_type} checkpoint can be one of {', '.join(shown)}."
        )
    return heads[config.architectures[0]]


def model_head(model):
    """The `Head` of a loaded model, from its class name (`CasanRobertaForMaskedLM`, `BertModel`)."""
    return architecture_heads()[type(model).__name__]
