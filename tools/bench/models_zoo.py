"""Real architectures with random weights: transformers configs, torchvision and timm when importable.

Nothing is downloaded: every model is built from a config with random initialization. Imports are
lazy, so a missing library only fails (as "skipped") the models that need it. Vision models prefer
torchvision (then timm) and fall back to the same architecture from `transformers`; the workload's
`source` records which one ran.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import torch
from torch import nn

from tools.bench.registry import BuildContext, Workload, benchmark_model, randint, randn


class FirstOutput(nn.Module):
    """Runs a `transformers` model and returns its first output (logits or last hidden state) as a tensor."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)[0]


def _hf_config(name: str, **overrides: Any) -> Any:
    import transformers

    config = getattr(transformers, name)(**overrides)
    config.use_cache = False  # no KV-cache objects in the outputs
    return config


def _hf_model(class_name: str, config: Any) -> nn.Module:
    import transformers

    return FirstOutput(getattr(transformers, class_name)(config))


def _token_inputs(ctx: BuildContext, vocab: int, batch: int, seq: int):  # type: ignore[no-untyped-def]
    return lambda g: (randint(g, vocab, batch, seq, device=ctx.device),)


def _image_inputs(ctx: BuildContext, batch: int, side: int):  # type: ignore[no-untyped-def]
    return lambda g: (randn(g, batch, 3, side, side, device=ctx.device),)


_NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
_GPT2_NO_DROPOUT = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}

# ---------------------------------------------------------------- small transformers (CPU and GPU)


@benchmark_model("bert_small", family="transformer")
def bert_small(ctx: BuildContext) -> Workload:
    """BertModel, 2 layers, hidden 128, 2 heads, vocab 1000; batch 4 x 64 tokens (16 x 128 on CUDA)."""
    config = _hf_config(
        "BertConfig", vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=512, max_position_embeddings=128, **_NO_DROPOUT,
    )
    batch, seq = (16, 128) if ctx.large else (4, 64)
    return Workload(_hf_model("BertModel", config).to(ctx.device), _token_inputs(ctx, 1000, batch, seq), source="transformers")


@benchmark_model("gpt2_small", family="transformer")
def gpt2_small(ctx: BuildContext) -> Workload:
    """GPT2LMHeadModel, 2 layers, 128 wide, 2 heads, vocab 1000; batch 4 x 64 tokens (16 x 128 on CUDA)."""
    config = _hf_config(
        "GPT2Config", vocab_size=1000, n_positions=128, n_embd=128, n_layer=2, n_head=2, bos_token_id=0,
        eos_token_id=0, **_GPT2_NO_DROPOUT,
    )
    batch, seq = (16, 128) if ctx.large else (4, 64)
    return Workload(
        _hf_model("GPT2LMHeadModel", config).to(ctx.device), _token_inputs(ctx, 1000, batch, seq), source="transformers"
    )


@benchmark_model("llama_small", family="transformer")
def llama_small(ctx: BuildContext) -> Workload:
    """LlamaForCausalLM, 2 layers, hidden 128, 4 heads (2 KV heads), RMSNorm, rotary; batch 4 x 64 (16 x 128 on CUDA)."""
    config = _hf_config(
        "LlamaConfig", vocab_size=1000, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    )
    batch, seq = (16, 128) if ctx.large else (4, 64)
    return Workload(
        _hf_model("LlamaForCausalLM", config).to(ctx.device), _token_inputs(ctx, 1000, batch, seq), source="transformers"
    )


# ---------------------------------------------------------------- full-size models (GPU only)


def _bf16_token_model(ctx: BuildContext, model_class: str, config: Any, batch: int, tokens: int) -> Workload:
    """transformers' `model_class` built from `config`, fed `batch` x `tokens` random token ids, run under
    bf16 autocast."""
    return Workload(
        _hf_model(model_class, config).to(ctx.device),
        _token_inputs(ctx, config.vocab_size, batch, tokens),
        autocast=torch.bfloat16,
        source="transformers",
    )


@benchmark_model("bert_base", family="transformer", devices=("cuda",))
def bert_base(ctx: BuildContext) -> Workload:
    """BERT-base (12 layers, hidden 768) from BertConfig(), batch 8 x 512 tokens, bf16 autocast."""
    config = _hf_config("BertConfig", **_NO_DROPOUT)
    return _bf16_token_model(ctx, "BertModel", config, 8, 512)


@benchmark_model("gpt2", family="transformer", devices=("cuda",))
def gpt2(ctx: BuildContext) -> Workload:
    """GPT-2 (124M: 12 layers, 768 wide) from GPT2Config(), batch 8 x 512 tokens, bf16 autocast."""
    config = _hf_config("GPT2Config", **_GPT2_NO_DROPOUT)
    return _bf16_token_model(ctx, "GPT2LMHeadModel", config, 8, 512)


@benchmark_model("llama_1b_8l", family="transformer", devices=("cuda",))
def llama_1b_8l(ctx: BuildContext) -> Workload:
    """LLaMA-3.2-1B shapes cut to 8 layers (2048 wide, 32/8 KV heads, MLP 8192, vocab 128256), 4 x 512 tokens, bf16 autocast."""
    config = _hf_config(
        "LlamaConfig", vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=8,
        num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=2048, rope_theta=500000.0,
        tie_word_embeddings=True,
    )
    return _bf16_token_model(ctx, "LlamaForCausalLM", config, 4, 512)


@benchmark_model("mistral_1b_8l", family="transformer", devices=("cuda",))
def mistral_1b_8l(ctx: BuildContext) -> Workload:
    """Mistral-style decoder at 1B widths cut to 8 layers (2048 wide, 32/8 KV heads, MLP 7168, sliding window
    4096, vocab 32000, untied head), 4 x 512 tokens, bf16 autocast."""
    config = _hf_config(
        "MistralConfig", vocab_size=32000, hidden_size=2048, intermediate_size=7168, num_hidden_layers=8,
        num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=4096, sliding_window=4096,
        attention_dropout=0.0,
    )
    return _bf16_token_model(ctx, "MistralForCausalLM", config, 4, 512)


@benchmark_model("qwen2_1b_8l", family="transformer", devices=("cuda",))
def qwen2_1b_8l(ctx: BuildContext) -> Workload:
    """Qwen2-1.5B shapes cut to 8 layers (1536 wide, 12/2 KV heads, q/k/v biases, MLP 8960, vocab 151936, tied
    embeddings, rope theta 1e6), 4 x 512 tokens, bf16 autocast."""
    config = _hf_config(
        "Qwen2Config", vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=8,
        num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=4096, rope_theta=1000000.0,
        tie_word_embeddings=True, attention_dropout=0.0,
    )
    return _bf16_token_model(ctx, "Qwen2ForCausalLM", config, 4, 512)


@benchmark_model("distilbert", family="transformer", devices=("cuda",))
def distilbert(ctx: BuildContext) -> Workload:
    """DistilBERT (6 layers, hidden 768) from DistilBertConfig(), batch 16 x 512 tokens, bf16 autocast."""
    config = _hf_config("DistilBertConfig", dropout=0.0, attention_dropout=0.0)
    return _bf16_token_model(ctx, "DistilBertModel", config, 16, 512)


@benchmark_model("roberta_base", family="transformer", devices=("cuda",))
def roberta_base(ctx: BuildContext) -> Workload:
    """RoBERTa-base (12 layers, hidden 768, vocab 50265, 514 positions), batch 8 x 510 tokens, bf16 autocast.

    510 tokens: RoBERTa numbers positions from `pad_token_id + 1`, so 512 tokens would pass its 514 positions."""
    config = _hf_config(
        "RobertaConfig", vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, **_NO_DROPOUT
    )
    return _bf16_token_model(ctx, "RobertaModel", config, 8, 510)


class EncoderDecoderFirstOutput(nn.Module):
    """Runs a `transformers` encoder-decoder on encoder and decoder token ids; returns its logits."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor) -> torch.Tensor:
        return self.inner(input_ids=input_ids, decoder_input_ids=decoder_input_ids)[0]


@benchmark_model("t5_small", family="transformer", devices=("cuda",))
def t5_small(ctx: BuildContext) -> Workload:
    """T5-small (6 + 6 layers, d_model 512, vocab 32128) from T5Config(), batch 16: 512 encoder and 128 decoder
    tokens, bf16 autocast."""
    import transformers

    config = _hf_config("T5Config", dropout_rate=0.0)
    model = EncoderDecoderFirstOutput(transformers.T5ForConditionalGeneration(config)).to(ctx.device)
    vocab = config.vocab_size
    return Workload(
        model,
        lambda g: (randint(g, vocab, 16, 512, device=ctx.device), randint(g, vocab, 16, 128, device=ctx.device)),
        autocast=torch.bfloat16,
        source="transformers",
    )


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _torchvision_or_hf(tv_name: str, hf_class: str, hf_config: str, **hf_overrides: Any) -> tuple[nn.Module, str]:
    if _has("torchvision"):
        import torchvision

        return getattr(torchvision.models, tv_name)(weights=None), "torchvision"
    return _hf_model(hf_class, _hf_config(hf_config, **hf_overrides)), "transformers"


def _vision_model(
    tv_name: str, tv_options: dict[str, Any], timm_name: str, hf_class: str, hf_config: str, **hf_overrides: Any
) -> tuple[nn.Module, str]:
    """The architecture from torchvision (with `tv_options`), else timm, else `transformers`; and which one."""
    if _has("torchvision"):
        import torchvision

        return getattr(torchvision.models, tv_name)(weights=None, **tv_options), "torchvision"
    if _has("timm"):
        import timm

        # timm's defaults have no dropout and no stochastic depth
        return timm.create_model(timm_name, pretrained=False), "timm"
    return _hf_model(hf_class, _hf_config(hf_config, **hf_overrides)), "transformers"


@benchmark_model("resnet18", family="conv", devices=("cuda",), quick_on=("cuda",))
def resnet18(ctx: BuildContext) -> Workload:
    """ResNet-18, batch 16 of 128x128 images (the seed tutorial's setting)."""
    model, source = _torchvision_or_hf(
        "resnet18", "ResNetForImageClassification", "ResNetConfig",
        layer_type="basic", depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512], num_labels=1000,
    )
    return Workload(model.to(ctx.device), _image_inputs(ctx, 16, 128), source=source)


@benchmark_model("resnet50", family="conv", devices=("cuda",))
def resnet50(ctx: BuildContext) -> Workload:
    """ResNet-50, batch 32 of 224x224 images."""
    model, source = _torchvision_or_hf("resnet50", "ResNetForImageClassification", "ResNetConfig", num_labels=1000)
    return Workload(model.to(ctx.device), _image_inputs(ctx, 32, 224), source=source)


@benchmark_model("mobilenet_v2", family="conv", devices=("cuda",))
def mobilenet_v2(ctx: BuildContext) -> Workload:
    """MobileNetV2, batch 32 of 224x224 images."""
    model, source = _torchvision_or_hf(
        "mobilenet_v2", "MobileNetV2ForImageClassification", "MobileNetV2Config", tf_padding=False, num_labels=1000
    )
    return Workload(model.to(ctx.device), _image_inputs(ctx, 32, 224), source=source)


@benchmark_model("vit_b_16", family="transformer", devices=("cuda",))
def vit_b_16(ctx: BuildContext) -> Workload:
    """ViT-B/16, batch 32 of 224x224 images (torchvision, else timm, else transformers' ViTConfig())."""
    if _has("torchvision"):
        import torchvision

        model, source = torchvision.models.vit_b_16(weights=None), "torchvision"
    elif _has("timm"):
        import timm

        model, source = timm.create_model("vit_base_patch16_224", pretrained=False), "timm"
    else:
        config = _hf_config("ViTConfig", num_labels=1000, **_NO_DROPOUT)
        model, source = _hf_model("ViTForImageClassification", config), "transformers"
    return Workload(model.to(ctx.device), _image_inputs(ctx, 32, 224), source=source)


# Dropout and stochastic depth are off: random masks would make eager's and the compiled training step
# differ (and fail the accuracy check) for reasons that have nothing to do with the compiler.


@benchmark_model("convnext_tiny", family="conv", devices=("cuda",))
def convnext_tiny(ctx: BuildContext) -> Workload:
    """ConvNeXt-Tiny (depths 3-3-9-3, widths 96-768), no stochastic depth, batch 32 of 224x224 images."""
    model, source = _vision_model(
        "convnext_tiny", {"stochastic_depth_prob": 0.0}, "convnext_tiny", "ConvNextForImageClassification",
        "ConvNextConfig", drop_path_rate=0.0, num_labels=1000,
    )
    return Workload(model.to(ctx.device), _image_inputs(ctx, 32, 224), source=source)


@benchmark_model("efficientnet_b0", family="conv", devices=("cuda",))
def efficientnet_b0(ctx: BuildContext) -> Workload:
    """EfficientNet-B0 (width and depth 1.0), no dropout or stochastic depth, batch 64 of 224x224 images."""
    model, source = _vision_model(
        "efficientnet_b0", {"dropout": 0.0, "stochastic_depth_prob": 0.0}, "efficientnet_b0",
        "EfficientNetForImageClassification", "EfficientNetConfig", width_coefficient=1.0, depth_coefficient=1.0,
        image_size=224, hidden_dim=1280, dropout_rate=0.0, drop_connect_rate=0.0, num_labels=1000,
    )
    return Workload(model.to(ctx.device), _image_inputs(ctx, 64, 224), source=source)
