"""The inductor backend with the Triton generator, run on CPU through Triton's interpreter.

CUDA graphs pick codegen_triton; on a machine without a GPU, `TritonBackend(device_type="cpu")`
runs the same generated kernels in Triton's interpreter (TRITON_INTERPRET=1, as CI sets it), so the
frontend's wiring of the Triton path (its config, timing, debug output) is tested everywhere.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

import frontend
from frontend.backends import inductor as inductor_backend
from frontend.config import Config

pytestmark = [
    pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs TRITON_INTERPRET=1 (set by nox)"),
    pytest.mark.usefixtures("fresh_cache"),
]


def _fused(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.relu(torch.sin(x) * y) + x.sum(dim=1, keepdim=True)


def test_triton_generator_through_frontend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import codegen_triton

    made: list[Any] = []

    def triton_on_cpu(device_type: str, config: Config) -> Any:
        options = codegen_triton.TritonBackend.parse_options(config.kernel_backend_options("cuda"))
        made.append(options)
        return codegen_triton.TritonBackend("cpu", options)

    monkeypatch.setattr(inductor_backend, "load_kernel_backend", triton_on_cpu)
    with frontend.config.patch(fallback_to_eager=False, debug=True, debug_dir=tmp_path):
        compiled = frontend.compile(_fused, options={"max_autotune": True})
    x, y = torch.randn(8, 32), torch.randn(8, 32)
    torch.testing.assert_close(compiled(x, y), _fused(x, y))
    assert made and made[0].max_configs == 16
    (graph_folder,) = tmp_path.glob("run_*/_fused_graph*")
    kernels = [p for p in (graph_folder / "forward").iterdir() if p.name.startswith("kernel")]
    assert kernels and "@triton.jit" in kernels[0].read_text()
