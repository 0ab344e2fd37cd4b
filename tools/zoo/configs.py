"""Tiny `transformers` configs: every size a family knows shrunk to a few dozen, no downloads.

`tiny_config(model_type, overrides)` instantiates the family's config class once with its defaults to
learn which fields it has (aliases included: GPT-2's `hidden_size` is its `n_embd`), then builds the
real config with the tiny value of each field it has, the family's own `overrides` on top. Sizes go
through the constructor, not by assignment afterwards, because many configs derive fields in
`__init__` (`layer_types` from the layer count, `head_dim` from the width). Sub-configs (CLIP's text
and vision towers) are shrunk the same way, one level down.
"""

from __future__ import annotations

from typing import Any

TINY: dict[str, Any] = {
    # widths: 4 heads of 8
    "hidden_size": 32,
    "d_model": 32,
    "embed_dim": 32,
    "num_attention_heads": 4,
    "num_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "d_kv": 8,
    "intermediate_size": 64,
    "d_ff": 64,
    "ffn_dim": 64,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "projection_dim": 16,
    # depth: 2 layers everywhere
    "num_hidden_layers": 2,
    "num_layers": 2,
    "num_decoder_layers": 2,
    "encoder_layers": 2,
    "decoder_layers": 2,
    # vocabulary and positions
    "vocab_size": 256,
    "max_position_embeddings": 128,
    # mixtures of experts: 4 experts, 2 per token
    "num_local_experts": 4,
    "num_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    # images: 32x32, patches of 4
    "image_size": 32,
    "patch_size": 4,
}
"""Field name -> tiny value; a field is set only where the family's config has it."""

OMIT = "<omit>"
"""An override value meaning: do not pass this tiny field (Funnel refuses `num_hidden_layers`)."""

VOCAB_MARGIN = 4
"""Token ids in the inputs avoid the lowest ids (pad/bos/eos in most families) and the top few."""


def _config_class(model_type: str) -> type:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return CONFIG_MAPPING[model_type]  # type: ignore[no-any-return]


def _tiny_kwargs(config_class: type, overrides: dict[str, Any]) -> dict[str, Any]:
    """The tiny fields `config_class` has, with `overrides` on top, token ids kept inside the vocabulary."""
    default = config_class()
    aliases = getattr(default, "attribute_map", {}) or {}
    kwargs = {key: value for key, value in TINY.items()
              if key not in overrides and aliases.get(key) not in overrides and _settable(default, key, value)}
    kwargs.update({key: value for key, value in overrides.items() if value != OMIT})
    vocab = kwargs.get("vocab_size", getattr(default, "vocab_size", None))
    if isinstance(vocab, int):
        for key in dir(default):
            if key.endswith("_token_id") and key not in overrides:
                value = getattr(default, key, None)
                if isinstance(value, int) and value >= vocab:
                    kwargs[key] = vocab - 1  # e.g. GPT-2's 50256: the embedding would be indexed out of range
    if "use_cache" not in overrides and _has_field(default, "use_cache"):
        kwargs["use_cache"] = False  # no KV-cache objects in the outputs
    for name, sub_class in (getattr(config_class, "sub_configs", None) or {}).items():
        if name in overrides or not isinstance(sub_class, type) or sub_class.__name__ == "AutoConfig":
            continue
        kwargs[name] = _tiny_kwargs(sub_class, {})
    return kwargs


def _has_field(config: Any, key: str) -> bool:
    try:
        return hasattr(config, key)
    except Exception:  # some configs raise on reading an alias they do not support
        return False


def _settable(config: Any, key: str, value: Any) -> bool:
    """Whether `key` is a plain field of `config` whose default has the type of `value` (or is unset).

    Derived properties (Falcon's `head_dim`) cannot be set, and a per-stage list (Swin's `num_heads`)
    must not become one number.
    """
    if not _has_field(config, key) or isinstance(getattr(type(config), key, None), property):
        return False
    current = getattr(config, key)
    return current is None or (type(current) is type(value))


def tiny_config(model_type: str, overrides: dict[str, Any] | None = None) -> Any:
    """The config of `model_type` with every known size tiny and `overrides` applied."""
    from transformers import AutoConfig

    kwargs = _tiny_kwargs(_config_class(model_type), dict(overrides or {}))
    return AutoConfig.for_model(model_type, **kwargs)
