"""Seeded random inputs for the zoo's models: one maker per input kind, two shapes per maker.

Every maker takes the model's config, a seeded `torch.Generator` and `variant` ("base" for calls 1-3,
"new" for call 4) and returns the keyword arguments of one forward call. "new" changes what a user
would change between calls: the sequence length for text and audio, the image size for networks that
take any size, the batch size for networks tied to one image size (a ViT's position table).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tools.zoo.configs import VOCAB_MARGIN

Inputs = dict[str, Any]
InputMaker = Callable[[Any, torch.Generator, str], Inputs]

BATCH = 2
SEQ = {"base": 8, "new": 12}
IMAGE = {"base": 32, "new": 64}
AUDIO = {"base": 1600, "new": 2400}


def _vocab(config: Any) -> int:
    text = getattr(config, "text_config", None)
    vocab = getattr(config, "vocab_size", None) or getattr(text, "vocab_size", None)
    return int(vocab or 256)


def _ids(config: Any, g: torch.Generator, batch: int, seq: int) -> torch.Tensor:
    vocab = _vocab(config)
    return torch.randint(VOCAB_MARGIN, vocab - VOCAB_MARGIN, (batch, seq), generator=g)


def _mask(ids: torch.Tensor) -> torch.Tensor:
    return torch.ones_like(ids)


def _channels(config: Any) -> int:
    vision = getattr(config, "vision_config", None)
    return int(getattr(config, "num_channels", None) or getattr(vision, "num_channels", None) or 3)


def _image(config: Any, g: torch.Generator, batch: int, side: int) -> torch.Tensor:
    return torch.randn(batch, _channels(config), side, side, generator=g)


def tokens(config: Any, g: torch.Generator, variant: str) -> Inputs:
    """input_ids and an all-ones attention_mask, batch 2, 8 tokens (12 for "new")."""
    ids = _ids(config, g, BATCH, SEQ[variant])
    return {"input_ids": ids, "attention_mask": _mask(ids)}


def tokens_only(config: Any, g: torch.Generator, variant: str) -> Inputs:
    """input_ids alone (families whose forward has no attention_mask)."""
    return {"input_ids": _ids(config, g, BATCH, SEQ[variant])}


def seq2seq(config: Any, g: torch.Generator, variant: str) -> Inputs:
    """Encoder ids and mask, decoder ids (6 tokens, 9 for "new"): an encoder-decoder's teacher-forced step."""
    ids = _ids(config, g, BATCH, SEQ[variant])
    decoder = _ids(config, g, BATCH, SEQ[variant] * 3 // 4)
    return {"input_ids": ids, "attention_mask": _mask(ids), "decoder_input_ids": decoder}


def image_any_size(config: Any, g: torch.Generator, variant: str) -> Inputs:
    """pixel_values, 2 images of 32x32 (64x64 for "new"): convolutional networks take any size."""
    return {"pixel_values": _image(config, g, BATCH, IMAGE[variant])}


def image_fixed_size(config: Any, g: torch.Generator, variant: str) -> Inputs:
    """pixel_values at the config's image size, 2 images (3 for "new"): the position table fixes the size."""
    size = getattr(config, "image_size", 32)
    side = int(size[0] if isinstance(size, (list, tuple)) else size)
    return {"pixel_values": _image(config, g, BATCH if variant == "base" else BATCH + 1, side)}


def audio(config: Any, g: torch.Generator, variant: str) -> Inputs:
    """input_values, 2 raw waveforms of 1600 samples (2400 for "new")."""
    return {"input_values": torch.randn(BATCH, AUDIO[variant], generator=g)}


def spectrogram(config: Any, g: torch.Generator, variant: str) -> Inputs:
    """input_values as (batch, frames, mel bins) at the config's frame count (batch 3 for "new")."""
    batch = BATCH if variant == "base" else BATCH + 1
    return {"input_values": torch.randn(batch, int(config.max_length), int(config.num_mel_bins), generator=g)}


def whisper(config: Any, g: torch.Generator, variant: str) -> Inputs:
    """Log-mel features at the encoder's fixed length and decoder ids (6 tokens, 9 for "new")."""
    frames = 2 * int(config.max_source_positions)
    features = torch.randn(BATCH, int(config.num_mel_bins), frames, generator=g)
    return {"input_features": features, "decoder_input_ids": _ids(config, g, BATCH, SEQ[variant] * 3 // 4)}


def speech_features(config: Any, g: torch.Generator, variant: str) -> Inputs:
    """Filter-bank features (batch, frames, features) of 16 frames (24 for "new") and decoder ids."""
    frames = 2 * SEQ[variant]
    features = torch.randn(BATCH, frames, int(config.input_feat_per_channel) * int(config.input_channels), generator=g)
    return {"input_features": features, "decoder_input_ids": _ids(config, g, BATCH, SEQ[variant] // 2)}


def text_image(config: Any, g: torch.Generator, variant: str) -> Inputs:
    """Dual encoders (CLIP-style): token ids (8, 12 for "new") and images at the vision tower's size."""
    ids = _ids(config, g, BATCH, SEQ[variant])
    vision = getattr(config, "vision_config", config)
    side = int(getattr(vision, "image_size", 32))
    return {"input_ids": ids, "attention_mask": _mask(ids), "pixel_values": _image(config, g, BATCH, side)}


def text_image_no_mask(config: Any, g: torch.Generator, variant: str) -> Inputs:
    """As `text_image`, without the attention mask (SigLIP pads to a fixed length and takes no mask)."""
    inputs = text_image(config, g, variant)
    del inputs["attention_mask"]
    return inputs


def tv_any_size(config: Any, g: torch.Generator, variant: str) -> Inputs:
    """torchvision/timm networks that take any size: `x`, 2 images of 64x64 (96x96 for "new")."""
    return {"x": torch.randn(BATCH, 3, 64 if variant == "base" else 96, 64 if variant == "base" else 96, generator=g)}


def tv_fixed_size(config: Any, g: torch.Generator, variant: str) -> Inputs:
    """torchvision/timm networks tied to 224x224: `x`, 2 images (3 for "new")."""
    return {"x": torch.randn(BATCH if variant == "base" else BATCH + 1, 3, 224, 224, generator=g)}


MAKERS: dict[str, InputMaker] = {
    "tokens": tokens,
    "tokens_only": tokens_only,
    "seq2seq": seq2seq,
    "image_any_size": image_any_size,
    "image_fixed_size": image_fixed_size,
    "audio": audio,
    "spectrogram": spectrogram,
    "whisper": whisper,
    "speech_features": speech_features,
    "text_image": text_image,
    "text_image_no_mask": text_image_no_mask,
    "tv_any": tv_any_size,
    "tv_fixed": tv_fixed_size,
}
"""Input kind name -> maker."""
