"""What the model files need from `transformers` that 4.x spells differently or lacks: the one place that
differs between transformers 4.56+ and 5.x, so that saved folders load with either (`trust_remote_code=True`).

Each name is imported from transformers 5 where it exists; otherwise (transformers 4.56 to 4.57) an
equivalent is built here, with the same numerics: the same masks, the same eager attention, the same output
capture. Older transformers fail at import with a message naming the minimum version.
"""

import dataclasses
from functools import wraps
from types import SimpleNamespace

import torch
import transformers
from torch import nn


MINIMUM_TRANSFORMERS = "4.56"


def _major_minor(version):
    return tuple(int(part) for part in version.split(".")[:2])


def require_transformers(minimum, models):
    """An ImportError naming the minimum when the installed transformers is older: what a folder's code raises
    when it is loaded with `trust_remote_code` by a transformers it cannot run on."""
    if _major_minor(transformers.__version__) < _major_minor(minimum):
        raise ImportError(
            f"{models} need transformers >= {minimum} (found {transformers.__version__}): "
            f"pip install -U 'transformers>={minimum}'"
        )


require_transformers(MINIMUM_TRANSFORMERS, "casan-hf models")

try:
    from transformers.configuration_utils import PreTrainedConfig
except ImportError:  # transformers 4.x
    from transformers.configuration_utils import PretrainedConfig as PreTrainedConfig

try:
    from transformers import initialization as init
except ImportError:  # transformers 4.x: its loading skips initialised modules itself, so plain torch init does
    init = SimpleNamespace(
        zeros_=nn.init.zeros_,
        normal_=nn.init.normal_,
        constant_=nn.init.constant_,
        copy_=lambda tensor, other: tensor.copy_(other),
    )

try:
    from transformers.masking_utils import create_bidirectional_mask
except ImportError:  # transformers 4.x

    def create_bidirectional_mask(config, inputs_embeds, attention_mask, **kwargs):
        """transformers 5's mask for a 2D padding mask, as its `sdpa_mask`, `eager_mask` and
        `flash_attention_mask` build it: None without padding (unless tracing); else `(batch, 1, n, n)` booleans
        (sdpa), 0 and the dtype's minimum (eager), or the 2D mask itself (flash attention)."""
        if attention_mask is None or attention_mask.ndim == 4:
            return attention_mask
        padding = attention_mask.to(device=inputs_embeds.device, dtype=torch.bool)
        # As in transformers 5, no skip while tracing (ONNX, torch.export, compile): it would fix the example's case.
        tracing = torch.jit.is_tracing() or torch.compiler.is_compiling() or isinstance(padding, torch.fx.Proxy)
        if not tracing and padding.all():
            return None
        implementation = config._attn_implementation
        if implementation.startswith("flash_attention"):
            return padding
        if implementation not in ("sdpa", "eager"):
            raise ValueError(f"CASAN on transformers 4.x runs eager, sdpa or flash attention, not {implementation}.")
        batch_size, length = inputs_embeds.shape[:2]
        mask = padding[:, None, None, :].expand(batch_size, 1, length, padding.shape[-1])
        if implementation == "sdpa":
            return mask
        zero = torch.zeros((), device=mask.device, dtype=inputs_embeds.dtype)
        return torch.where(mask, zero, torch.finfo(inputs_embeds.dtype).min)


try:
    from transformers.models.bert.modeling_bert import eager_attention_forward
except ImportError:  # transformers 4.x: BERT's eager attention of transformers 5, as it is there

    def eager_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        if scaling is None:
            scaling = query.size(-1) ** -0.5
        attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)
        attn_output = torch.matmul(attn_weights, value)
        attn_output = attn_output.transpose(1, 2).contiguous()
        return attn_output, attn_weights


def attention_function(attention_functions):
    """`attention_functions.get_interface`, the lookup of `config._attn_implementation` that transformers' layers
    run at every call; transformers 4.x has no `get_interface`, so its equivalent."""
    if hasattr(attention_functions, "get_interface"):
        return attention_functions.get_interface

    def get_interface(implementation, eager):
        return eager if implementation == "eager" else attention_functions[implementation]

    return get_interface


try:
    from transformers.utils.generic import merge_with_config_defaults
    from transformers.utils.output_capturing import OutputRecorder, capture_outputs
except ImportError:  # transformers 4.x: `check_model_inputs` does both
    from transformers.utils.generic import OutputRecorder, check_model_inputs

    def merge_with_config_defaults(forward):
        return forward

    def capture_outputs(forward):
        """`check_model_inputs`, except that each `output_<name>` defaults to the config's (else False) as in
        transformers 5, rather than to `output_attentions`."""
        checked = check_model_inputs(forward)

        @wraps(forward)
        def wrapper(self, *args, **kwargs):
            for name in self._can_record_outputs:
                kwargs.setdefault(f"output_{name}", getattr(self.config, f"output_{name}", False))
            return checked(self, *args, **kwargs)

        return wrapper


def dataclass_config(cls):
    """A config class whose options are annotated fields, as transformers 5 makes every config a dataclass.

    transformers 4.x configs are plain classes taking keyword arguments: there, this makes `cls` a dataclass
    without an `__init__` of its own (so that `dataclasses.fields` lists its options) and gives it 4.x's
    keyword `__init__`: the fields are taken out, the rest goes to the parent config, then `__post_init__`.
    A subclass that declares fields (a family's defaults, ELECTRA's extra fields) needs it too, so that its
    defaults, not its parent's, are what a config.json that omits them gets.
    """
    if "__dataclass_fields__" in vars(cls):  # transformers 5 made it a dataclass already
        return cls
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False)

    def __init__(self, **kwargs):
        options = {}
        for option in dataclasses.fields(cls):
            if option.name in kwargs:
                options[option.name] = kwargs.pop(option.name)
            elif option.default_factory is not dataclasses.MISSING:
                options[option.name] = option.default_factory()
            else:
                options[option.name] = option.default
        super(cls, self).__init__(**kwargs)  # the next __init__ in the MRO: the transformers config's
        for name, value in options.items():
            setattr(self, name, value)
        self.__post_init__()

    cls.__init__ = __init__
    return cls


class FullyShardedLoading:
    """Mixed into the CASAN models (before `PreTrainedModel`) for transformers 5's FSDP2 loading
    (`from_pretrained(..., distributed_config=DistributedConfig(fsdp_size=N))`), which transformers 4.x lacks:

    - it shards the model before it ties the output embeddings to the input ones, so FSDP2 would hold two
      parameters that train apart after the first step; tied first, they are one parameter of one group;
    - the sharded model's state dict names a tied parameter once, as the one tied to its source (the decoder's
      bias, not the head's own): a checkpoint without the head leaves that source missing but unlisted, and on
      the meta device; it is materialized (and initialized) with the missing keys;
    - `generate()` runs the encoder and the decoder rather than the model, so FSDP2 would not gather the root's
      weights (the embeddings) for it: it is registered as a forward of the model;
    - FSDP2 makes the model an instance of a new class, `FSDP<name>`, defined in torch, whose file
      `save_pretrained` would copy as the model's code (and name in `auto_map`); that class takes the model's name
      and module, so the saved folder loads with `trust_remote_code=True` as one saved without sharding."""

    @classmethod
    def maybe_distribute_model(cls, model, distributed_config, mesh_manager):
        model_class = type(model)
        if mesh_manager is not None:
            model.tie_weights(recompute_mapping=False)
        model = super().maybe_distribute_model(model, distributed_config, mesh_manager)
        if type(model) is not model_class and model.can_generate():
            from torch.distributed.fsdp import register_fsdp_forward_method

            register_fsdp_forward_method(model, "generate")
        if type(model) is not model_class:
            for name in ("__module__", "__name__", "__qualname__"):
                setattr(type(model), name, getattr(model_class, name))
        return model

    def _move_missing_keys_from_meta_to_device(self, missing_keys, *args, **kwargs):
        tied = self.all_tied_weights_keys
        sources = {tied[key] for key in missing_keys if key in tied}
        unloaded = {source for source in sources if self.get_parameter_or_buffer(source).device.type == "meta"}
        return super()._move_missing_keys_from_meta_to_device(set(missing_keys) | unloaded, *args, **kwargs)


__all__ = [
    "OutputRecorder",
    "PreTrainedConfig",
    "FullyShardedLoading",
    "attention_function",
    "capture_outputs",
    "create_bidirectional_mask",
    "dataclass_config",
    "eager_attention_forward",
    "init",
    "merge_with_config_defaults",
]
