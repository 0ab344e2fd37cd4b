"""The benchmark suite's GPU models build on any machine: every CUDA-only builder runs on the meta device.

Building on `torch.device("meta")` allocates nothing, so a 600M-parameter decoder's config and module are
checked in a fraction of a second on a CPU-only machine. Where the architecture's forward pass runs on
meta tensors (encoders, the encoder-decoder, vision models) it runs too, which checks the inputs fit the
model (the encoder-decoder gets decoder ids, an image model gets its image size). Measuring needs CUDA.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tools.bench.registry import BuildContext
from tools.bench.suite import MODELS, select_models

ROOT = Path(__file__).resolve().parent.parent

GPU_ONLY = [spec.name for spec in MODELS.values() if spec.devices == ("cuda",)]
# Forward passes that decide on values (a causal mask's `.item()`) cannot run on meta tensors.
DATA_DEPENDENT = "cannot be called on meta tensors"


def test_the_gpu_suite_has_the_real_models() -> None:
    expected = {
        "llama_1b_8l", "mistral_1b_8l", "qwen2_1b_8l", "gpt2", "bert_base", "distilbert", "roberta_base", "t5_small",
        "vit_b_16", "resnet18", "resnet50", "mobilenet_v2", "convnext_tiny", "efficientnet_b0",
    }
    assert expected <= set(GPU_ONLY)
    assert len(GPU_ONLY) >= 12
    cuda_names = {spec.name for spec in select_models("cuda")}
    assert expected <= cuda_names
    assert not expected & {spec.name for spec in select_models("cpu")}


@pytest.mark.parametrize("name", GPU_ONLY)
def test_gpu_model_builds_on_meta(name: str) -> None:
    pytest.importorskip("transformers")
    spec = MODELS[name]
    with torch.device("meta"):
        workload = spec.build(BuildContext("meta"))
    parameters = list(workload.model.parameters())
    assert parameters and all(p.device.type == "meta" for p in parameters)
    assert sum(p.numel() for p in parameters) > 1_000_000  # a real model, not a toy
    inputs = workload.make_inputs(torch.Generator().manual_seed(0))
    assert inputs and all(isinstance(x, torch.Tensor) and x.device.type == "meta" for x in inputs)
    assert spec.description, "the docstring describes the model in --list"
    try:
        with torch.no_grad():
            output = workload.model.eval()(*inputs)
    except RuntimeError as error:
        if DATA_DEPENDENT not in str(error):
            raise
        return
    assert isinstance(output, torch.Tensor) and output.shape[0] == inputs[0].shape[0]
    if name == "t5_small":  # logits per decoder token
        assert tuple(output.shape[:2]) == tuple(inputs[1].shape)
