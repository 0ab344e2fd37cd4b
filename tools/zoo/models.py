"""The zoo's models: `transformers` architectures from tiny configs, torchvision and timm when installed.

A `ModelSpec` names the architecture, the task class that builds it, the kind of inputs it takes
(`tools.zoo.inputs.MAKERS`) and the config overrides the family needs beyond `configs.TINY`. Nothing
is downloaded: every model is built with random weights from a config. `build(spec)` returns the
model in eval mode and its config.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any

import torch

from tools.zoo.configs import OMIT, tiny_config


@dataclass(frozen=True)
class ModelSpec:
    """One zoo entry.

    Attributes:
        name: the zoo's name (the transformers model type, or ``torchvision.<fn>`` / ``timm.<name>``).
        family: decoder, encoder, encoder-decoder, vision, audio, multimodal.
        inputs: the input kind (a key of `tools.zoo.inputs.MAKERS`).
        task: the `transformers` Auto class that builds it (AutoModel, AutoModelForCausalLM, ...).
        overrides: config fields beyond the tiny defaults.
        model_type: the transformers model type, when it differs from `name`.
        source: "transformers", "torchvision" or "timm".
    """

    name: str
    family: str
    inputs: str
    task: str = "AutoModel"
    overrides: dict[str, Any] = field(default_factory=dict)
    model_type: str = ""
    source: str = "transformers"

    @property
    def config_type(self) -> str:
        """The transformers model type to build."""
        return self.model_type or self.name


CAUSAL = "AutoModelForCausalLM"
MASKED = "AutoModelForMaskedLM"
SEQ2SEQ = "AutoModelForSeq2SeqLM"
IMAGE_CLS = "AutoModelForImageClassification"

# Four stages of one block each; the layer count is the stage count in these configs, so it is not shrunk.
_CONV_STAGES = {"hidden_sizes": [8, 16, 32, 64], "depths": [1, 1, 1, 1], "num_labels": 10, "num_hidden_layers": OMIT}


def _decoder(name: str, task: str = CAUSAL, inputs: str = "tokens", **overrides: Any) -> ModelSpec:
    return ModelSpec(name, "decoder", inputs, task, overrides)


def _encoder(name: str, task: str = MASKED, inputs: str = "tokens", **overrides: Any) -> ModelSpec:
    return ModelSpec(name, "encoder", inputs, task, overrides)


def _seq2seq(name: str, task: str = SEQ2SEQ, inputs: str = "seq2seq", **overrides: Any) -> ModelSpec:
    return ModelSpec(name, "encoder-decoder", inputs, task, overrides)


def _vision(name: str, inputs: str = "image_any_size", task: str = IMAGE_CLS, **overrides: Any) -> ModelSpec:
    overrides.setdefault("num_labels", 10)
    return ModelSpec(name, "vision", inputs, task, overrides)


def _audio(name: str, inputs: str = "audio", task: str = "AutoModel", **overrides: Any) -> ModelSpec:
    return ModelSpec(name, "audio", inputs, task, overrides)


def _multimodal(name: str, inputs: str = "text_image", **overrides: Any) -> ModelSpec:
    return ModelSpec(name, "multimodal", inputs, "AutoModel", overrides)


# Waveform front ends: 2 small convolutions instead of 7 (1600 samples -> 79 frames).
_WAV_CONV = {"conv_dim": [16, 16], "conv_kernel": [10, 4], "conv_stride": [5, 4], "num_conv_pos_embeddings": 16,
             "num_conv_pos_embedding_groups": 4, "num_feat_extract_layers": 2, "mask_time_prob": 0.0}

TRANSFORMERS_MODELS: list[ModelSpec] = [
    # ---- decoders
    _decoder("llama"), _decoder("mistral"), _decoder("mixtral"), _decoder("qwen2"), _decoder("qwen2_moe"),
    _decoder("qwen3"), _decoder("qwen3_moe"), _decoder("phi", partial_rotary_factor=0.5), _decoder("phi3"),
    _decoder("phimoe"), _decoder("olmo"), _decoder("olmo2"), _decoder("olmoe"), _decoder("granite"),
    _decoder("granitemoe"), _decoder("cohere"), _decoder("cohere2"), _decoder("gemma"), _decoder("gemma2"),
    _decoder("gemma3_text"), _decoder("gpt2"), _decoder("gpt_neox", rotary_pct=0.5), _decoder("gptj", rotary_dim=4),
    _decoder("gpt_neo", attention_types=[[["global", "local"], 1]], window_size=4), _decoder("bloom"),
    _decoder("opt", word_embed_proj_dim=32), _decoder("falcon"), _decoder("gpt_bigcode"), _decoder("starcoder2"),
    _decoder("stablelm"), _decoder("persimmon"), _decoder("codegen", rotary_dim=4), _decoder("biogpt"),
    _decoder("xglm"), _decoder("mpt"), _decoder("ctrl"), _decoder("openai-gpt", inputs="tokens"),
    _decoder("helium"), _decoder("glm"), _decoder("glm4"), _decoder("smollm3"), _decoder("nemotron"),
    _decoder("exaone4"), _decoder("arcee"), _decoder("ministral"), _decoder("jetmoe"),
    _decoder("seed_oss"), _decoder("apertus"), _decoder("ernie4_5"), _decoder("bitnet"), _decoder("diffllama"),
    _decoder("deepseek_v3", head_dim=4, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8,
             first_k_dense_replace=1, n_group=1, topk_group=1),
    _decoder("mamba", inputs="tokens_only"), _decoder("rwkv", inputs="tokens_only"),
    _decoder("recurrent_gemma", inputs="tokens_only", lru_width=32, attention_window_size=8),
    # ---- encoders
    _encoder("bert"), _encoder("roberta"), _encoder("distilbert"), _encoder("albert", embedding_size=16),
    _encoder("electra", embedding_size=16), _encoder("deberta"), _encoder("deberta-v2"),
    _encoder("longformer", attention_window=[4, 4]), _encoder("camembert"), _encoder("xlm-roberta"),
    _encoder("mpnet"), _encoder("convbert", embedding_size=32), _encoder("mobilebert", embedding_size=16,
                                                                      intra_bottleneck_size=16),
    _encoder("squeezebert", embedding_size=32), _encoder("roformer", embedding_size=32), _encoder("ernie"),
    _encoder("megatron-bert"), _encoder("rembert", input_embedding_size=16, output_embedding_size=16), _encoder("ibert"),
    _encoder("modernbert", global_attn_every_n_layers=2, local_attention=4), _encoder("data2vec-text"),
    _encoder("roberta-prelayernorm"), _encoder("esm", pad_token_id=1, mask_token_id=2), _encoder("fnet", task="AutoModel"),
    _encoder("funnel", task="FunnelModel", block_sizes=[1, 1], num_decoder_layers=1, num_hidden_layers=OMIT),
    _encoder("layoutlm"), _encoder("xlm"), _encoder("flaubert"), _encoder("big_bird", attention_type="original_full"),
    # ---- encoder-decoders
    _seq2seq("t5"), _seq2seq("mt5"), _seq2seq("umt5"), _seq2seq("longt5"), _seq2seq("switch_transformers", num_experts=4),
    _seq2seq("bart"), _seq2seq("mbart"), _seq2seq("pegasus"), _seq2seq("marian"), _seq2seq("led"),
    _seq2seq("blenderbot"), _seq2seq("blenderbot-small"), _seq2seq("plbart"), _seq2seq("m2m_100"), _seq2seq("mvp"),
    _seq2seq("prophetnet", ngram=2, num_encoder_layers=2, num_decoder_layers=2, num_hidden_layers=OMIT), _seq2seq("fsmt", src_vocab_size=256, tgt_vocab_size=256, langs=["en", "de"]),
    _seq2seq("pegasus_x", block_size=4, num_global_tokens=4),
    _seq2seq("whisper", inputs="whisper", task="AutoModelForSpeechSeq2Seq", num_mel_bins=16, max_source_positions=16,
             max_target_positions=32),
    _seq2seq("speech_to_text", inputs="speech_features", task="AutoModelForSpeechSeq2Seq", input_feat_per_channel=8,
             conv_channels=16, max_source_positions=64, max_target_positions=32),
    # ---- vision
    _vision("vit", inputs="image_fixed_size"), _vision("deit", inputs="image_fixed_size", task="DeiTForImageClassification"),
    _vision("beit", inputs="image_fixed_size"), _vision("data2vec-vision", inputs="image_fixed_size"),
    _vision("dinov2", inputs="image_any_size"), _vision("vit_msn", inputs="image_fixed_size"),
    _vision("swin", embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4),
    _vision("swinv2", embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4),
    _vision("convnext", **_CONV_STAGES), _vision("convnextv2", **_CONV_STAGES),
    _vision("resnet", embedding_size=8, **_CONV_STAGES), _vision("regnet", embedding_size=8, **_CONV_STAGES),
    _vision("bit", embedding_size=8, **_CONV_STAGES, global_padding="SAME", layer_type="bottleneck", num_groups=4),
    _vision("mobilevit", hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32]),
    _vision("mobilenet_v1", depth_multiplier=0.25), _vision("mobilenet_v2", depth_multiplier=0.25),
    _vision("efficientnet", width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320),
    _vision("levit", inputs="image_fixed_size", task="LevitForImageClassification", image_size=64, patch_size=16, hidden_sizes=[16, 32, 48], num_attention_heads=[2, 2, 2],
            depths=[1, 1, 1], key_dim=[4, 4, 4]),
    _vision("poolformer", hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1]),
    _vision("pvt", hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_attention_heads=[1, 2, 4, 8], inputs="image_fixed_size"),
    _vision("pvt_v2", hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_attention_heads=[1, 2, 4, 8]),
    _vision("segformer", hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], decoder_hidden_size=32),
    _vision("cvt", embed_dim=[16, 32, 32], num_heads=[1, 2, 2], depth=[1, 2, 3]),
    _vision("focalnet", embed_dim=16, depths=[1, 1], hidden_sizes=[16, 32]),
    _vision("yolos", inputs="image_fixed_size", task="AutoModel", num_detection_tokens=4, image_size=[32, 32]),
    # ---- audio
    _audio("wav2vec2", **_WAV_CONV), _audio("hubert", **_WAV_CONV), _audio("wavlm", **_WAV_CONV),
    _audio("data2vec-audio", **_WAV_CONV), _audio("unispeech", **_WAV_CONV), _audio("unispeech-sat", **_WAV_CONV),
    _audio("sew", **_WAV_CONV, squeeze_factor=2), _audio("wav2vec2-conformer", **_WAV_CONV),
    _audio("audio-spectrogram-transformer", inputs="spectrogram", num_mel_bins=16, max_length=32, patch_size=8,
           frequency_stride=8, time_stride=8),
    # ---- multimodal
    _multimodal("clip"), _multimodal("siglip", inputs="text_image_no_mask"), _multimodal("chinese_clip"),
    _multimodal("altclip"), _multimodal("groupvit"), _multimodal("owlvit"),
]
"""Every transformers entry, in table order."""


def _torchvision_specs() -> list[ModelSpec]:
    names = ["resnet18", "resnet50", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "regnet_y_400mf",
             "densenet121", "shufflenet_v2_x0_5", "squeezenet1_1", "vit_b_16", "swin_t", "maxvit_t"]
    fixed = {"vit_b_16", "maxvit_t"}
    return [ModelSpec(f"torchvision.{name}", "vision", "tv_fixed" if name in fixed else "tv_any", name, source="torchvision")
            for name in names]


def _timm_specs() -> list[ModelSpec]:
    names = ["resnet18", "efficientnet_b0", "convnext_atto", "vit_tiny_patch16_224", "deit_tiny_patch16_224",
             "mobilevitv2_050", "regnetx_002", "levit_128s"]
    return [ModelSpec(f"timm.{name}", "vision", "tv_fixed", name, source="timm") for name in names]


def all_specs() -> list[ModelSpec]:
    """Every model this environment can build: transformers, plus torchvision and timm when importable."""
    specs = list(TRANSFORMERS_MODELS)
    if importlib.util.find_spec("torchvision") is not None:
        specs += _torchvision_specs()
    if importlib.util.find_spec("timm") is not None:
        specs += _timm_specs()
    return specs


def find(name: str) -> ModelSpec:
    """The spec called `name` (also torchvision/timm ones, whether or not they are installed)."""
    for spec in [*TRANSFORMERS_MODELS, *_torchvision_specs(), *_timm_specs()]:
        if spec.name == name:
            return spec
    raise KeyError(f"no zoo model called {name!r}; `python -m tools.zoo --list` lists them")


def build(spec: ModelSpec, train: bool = False) -> tuple[torch.nn.Module, Any]:
    """The model of `spec` with random weights and its config (None outside transformers).

    In eval mode; with `train`, in training mode with dropout (and every other random training
    behaviour the config controls) at zero, see `tools.zoo.training`.
    """
    from tools.zoo.training import prepare, zero_randomness

    if spec.source == "torchvision":
        import torchvision

        network = getattr(torchvision.models, spec.task)(weights=None)
        return (prepare(network) if train else network.eval()), None
    if spec.source == "timm":
        import timm

        network = timm.create_model(spec.task, pretrained=False)
        return (prepare(network) if train else network.eval()), None
    import transformers

    config = tiny_config(spec.config_type, spec.overrides)
    if train:
        zero_randomness(config)
    model_class = getattr(transformers, spec.task)
    # Auto classes pick the architecture from the config; a concrete class (DeiT, whose image
    # classification has two heads to choose from) is constructed directly.
    model = model_class.from_config(config) if spec.task.startswith("Auto") else model_class(config)
    return (prepare(model) if train else model.eval()), config


SLICE: tuple[str, ...] = (
    "llama", "qwen2_moe", "gemma2", "gpt2", "bloom", "bert", "deberta-v2", "t5", "whisper", "vit", "convnext",
    "wav2vec2", "clip",
)
"""The CI slice (tests/test_zoo_slice.py): diverse and quick, capture only."""

DEFAULT_BACKEND_MODELS: tuple[str, ...] = (
    "llama", "qwen2", "gpt2", "bert", "distilbert", "t5", "bart", "vit", "convnext", "resnet", "wav2vec2", "clip",
)
"""Models the full run (`--default-backend`) also compiles with Kiln's default backend."""
