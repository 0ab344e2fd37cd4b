"""Real `transformers` models through aotgrad, with fallbacks off so a tracing failure fails the test."""

from __future__ import annotations

import pytest
import torch

import aotgrad

transformers = pytest.importorskip("transformers")


def test_bert_attention_view_after_decomposed_sdpa_traces() -> None:
    # BERT reshapes attention output with a `view` that is only valid for eager's SDPA strides;
    # after decomposition the strides differ, so aotgrad must re-decide view-or-copy.
    config = transformers.BertConfig(
        num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=100
    )
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, 100, (2, 8))
    compiled = aotgrad.aot_module(
        model, fw_compiler=aotgrad.eager_compiler, config=aotgrad.AotConfig(fallback_to_eager=False)
    )
    with torch.no_grad():
        expected = model(input_ids=ids).last_hidden_state
        actual = compiled(input_ids=ids).last_hidden_state
    torch.testing.assert_close(actual, expected)
