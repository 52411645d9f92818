"""Which head a checkpoint or a loaded model is, by the class name its config's `architectures` or its type gives:
CASAN's classes and their transformers twins of every family."""

from ..families import FAMILIES, HEADS, get_family


# Class name -> head, for CASAN's classes and their transformers twins in every family: what a checkpoint's
# `architectures` may name.
ARCHITECTURE_HEADS = {
    name: head
    for family in FAMILIES
    for head in HEADS
    for name in (family.class_name(head), family.source_class_name(head))
}


def checkpoint_head(config):
    """The `Head` a checkpoint's `architectures` names (the base model when it names none), or a ValueError
    naming the architecture and the heads that can be inspected. Refuses model types outside CASAN's families
    (through `get_family`) first."""
    family = get_family(config.model_type)
    if not config.architectures:
        return HEADS[0]
    if config.architectures[0] not in ARCHITECTURE_HEADS:
        shown = [name for head in HEADS for name in (family.class_name(head), family.source_class_name(head))]
        raise ValueError(
            f"Checkpoint architecture {config.architectures[0]!r} is not a head that can be inspected; "
            f"a {config.model_type} checkpoint can be one of {', '.join(shown)}."
        )
    return ARCHITECTURE_HEADS[config.architectures[0]]


def model_head(model):
    """The `Head` of a loaded model, from its class name (`CasanRobertaForMaskedLM`, `BertModel`)."""
    return ARCHITECTURE_HEADS[type(model).__name__]
