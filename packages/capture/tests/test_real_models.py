"""Real models captured whole: HuggingFace BERT, GPT-2 and T5 built from small configs, a ResNet."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
import torch
from capture_helpers import RecordingBackend
from torch import nn

import capture

transformers = pytest.importorskip("transformers")
logging.getLogger("transformers").setLevel(logging.ERROR)


def _bert(attention: str = "sdpa") -> tuple[nn.Module, Callable[[], dict[str, torch.Tensor]]]:
    config = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=128, max_position_embeddings=64, attn_implementation=attention)
    model = transformers.BertModel(config).eval()
    return model, lambda: {"input_ids": torch.randint(0, 100, (2, 16)),
                           "attention_mask": torch.randint(0, 2, (2, 16)).index_fill(1, torch.tensor([0]), 1)}


def _gpt2(attention: str = "sdpa") -> tuple[nn.Module, Callable[[], dict[str, torch.Tensor]]]:
    config = transformers.GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=2, n_positions=64,
                                     bos_token_id=0, eos_token_id=0, attn_implementation=attention)
    model = transformers.GPT2LMHeadModel(config).eval()
    return model, lambda: {"input_ids": torch.randint(0, 100, (2, 16))}


def _t5() -> tuple[nn.Module, Callable[[], dict[str, torch.Tensor]]]:
    config = transformers.T5Config(vocab_size=100, d_model=64, d_kv=32, d_ff=128, num_layers=2, num_heads=2)
    model = transformers.T5ForConditionalGeneration(config).eval()
    return model, lambda: {"input_ids": torch.randint(0, 100, (2, 16)),
                           "decoder_input_ids": torch.randint(0, 100, (2, 8))}


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of a model output, in a fixed order (ModelOutput keys, then nested containers)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for key in value for t in _tensors(value[key])]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


@pytest.mark.parametrize("build", [_bert, _gpt2, _t5], ids=["bert", "gpt2", "t5"])
def test_transformers_model_is_one_graph_and_matches_eager(build: Callable[[], Any]) -> None:
    torch.manual_seed(0)
    model, make_inputs = build()
    backend = RecordingBackend()
    compiled = capture.optimize(backend, nopython=True)(model)
    with torch.no_grad():
        for _ in range(2):  # the second call runs the cached entry on fresh inputs
            inputs = make_inputs()
            expected = model(**inputs)
            actual = compiled(**inputs)
            assert type(actual) is type(expected)
            assert list(actual.keys()) == list(expected.keys())
            expected_tensors, actual_tensors = _tensors(expected), _tensors(actual)
            assert len(actual_tensors) == len(expected_tensors) > 0
            for got, want in zip(actual_tensors, expected_tensors):
                torch.testing.assert_close(got, want)
    assert backend.count == 1


def test_explain_reports_one_graph_for_bert() -> None:
    torch.manual_seed(0)
    model, make_inputs = _bert()
    with torch.no_grad():
        inputs = make_inputs()
        explanation = capture.explain(lambda ids, mask: model(input_ids=ids, attention_mask=mask),
                                      inputs["input_ids"], inputs["attention_mask"])
        expected = model(**inputs).last_hidden_state
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0
    torch.testing.assert_close(explanation.result.last_hidden_state, expected)


def test_gpt2_tuple_output_matches_eager() -> None:
    torch.manual_seed(0)
    model, make_inputs = _gpt2()
    backend = RecordingBackend()
    compiled = capture.optimize(backend, nopython=True)(model)
    with torch.no_grad():
        inputs = make_inputs()
        expected = model(**inputs, return_dict=False, use_cache=False)
        actual = compiled(**inputs, return_dict=False, use_cache=False)
    assert isinstance(actual, tuple) and len(actual) == len(expected)
    torch.testing.assert_close(actual[0], expected[0])
    assert backend.count == 1


class _BasicBlock(nn.Module):
    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample: nn.Module | None = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class _ResNet(nn.Module):
    """torchvision's ResNet layout (stem, four stages of basic blocks, pooled linear head), small."""

    def __init__(self, widths: tuple[int, ...] = (8, 16, 32, 64), num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, inplanes = [], widths[0]
        for index, width in enumerate(widths):
            stride = 1 if index == 0 else 2
            stages.append(nn.Sequential(_BasicBlock(inplanes, width, stride), _BasicBlock(width, width)))
            inplanes = width
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(inplanes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_resnet_is_one_graph_and_matches_eager(training: bool) -> None:
    torch.manual_seed(0)
    model = _ResNet().train(training)
    reference = _ResNet().train(training)
    reference.load_state_dict(model.state_dict())
    backend = RecordingBackend()
    compiled = capture.optimize(backend, nopython=True)(model)
    for _ in range(2):
        x = torch.randn(2, 3, 32, 32)
        torch.testing.assert_close(compiled(x), reference(x))
    if training:  # running statistics were updated the same way
        torch.testing.assert_close(model.bn1.running_mean, reference.bn1.running_mean)
    assert backend.count == 1


def test_gpt2_incremental_decoding_with_the_returned_cache() -> None:
    torch.manual_seed(0)
    model, make_inputs = _gpt2()
    backend = RecordingBackend()
    compiled = capture.optimize(backend, nopython=True)(model)
    with torch.no_grad():
        prompt = make_inputs()["input_ids"]
        ours, eager = compiled(input_ids=prompt), model(input_ids=prompt)
        assert ours.past_key_values.get_seq_length() == eager.past_key_values.get_seq_length() == 16
        step = torch.randint(0, 100, (2, 1))
        ours = compiled(input_ids=step, past_key_values=ours.past_key_values)
        eager = model(input_ids=step, past_key_values=eager.past_key_values)
    torch.testing.assert_close(ours.logits, eager.logits)
    assert ours.past_key_values.get_seq_length() == 17
    assert backend.count == 2  # the prompt's graph and the decoding step's graph


def test_t5_with_attention_mask_is_one_graph() -> None:
    torch.manual_seed(0)
    model, make_inputs = _t5()
    backend = RecordingBackend()
    compiled = capture.optimize(backend, nopython=True)(model)
    inputs = make_inputs()
    inputs["attention_mask"] = torch.randint(0, 2, (2, 16)).index_fill(1, torch.tensor([0]), 1)
    with torch.no_grad():
        torch.testing.assert_close(compiled(**inputs).logits, model(**inputs).logits)
    assert backend.count == 1


@pytest.mark.parametrize("build", [_bert, _gpt2], ids=["bert", "gpt2"])
def test_hidden_states_and_attentions_are_recorded_in_one_graph(build: Callable[[], Any]) -> None:
    torch.manual_seed(0)
    model, make_inputs = build("eager")  # sdpa attention records no attention weights
    backend = RecordingBackend()
    compiled = capture.optimize(backend, nopython=True)(model)
    inputs = make_inputs()
    with torch.no_grad():
        # Compiled first: the recording hooks the model installs on first use are installed while tracing.
        ours = compiled(**inputs, output_hidden_states=True, output_attentions=True)
        eager = model(**inputs, output_hidden_states=True, output_attentions=True)
    assert len(ours.hidden_states) == len(eager.hidden_states) == 3
    assert len(ours.attentions) == len(eager.attentions) == 2
    for got, want in zip(_tensors(ours), _tensors(eager), strict=True):
        torch.testing.assert_close(got, want)
    inputs = make_inputs()
    with torch.no_grad():
        ours = compiled(**inputs, output_hidden_states=True, output_attentions=True)
        eager = model(**inputs, output_hidden_states=True, output_attentions=True)
    for got, want in zip(_tensors(ours), _tensors(eager), strict=True):
        torch.testing.assert_close(got, want)
    assert backend.count == 1


def test_model_output_semantics_match_eager_across_a_break() -> None:
    from transformers.modeling_outputs import BaseModelOutput

    def f(x: torch.Tensor) -> tuple[Any, ...]:
        out = BaseModelOutput(last_hidden_state=x.sin(), hidden_states=(x, x.cos()))
        out["attentions"] = (x * 2,)
        total = out[0] + out.hidden_states[1] + out["attentions"][0]
        head, rest = out[0], out[1:]
        capture.graph_break()
        return out, total, len(out), head, rest, out.to_tuple()

    backend = RecordingBackend()
    compiled = capture.optimize(backend)(f)
    x = torch.randn(3)
    ours, eager = compiled(x), f(x)
    assert type(ours[0]) is BaseModelOutput and list(ours[0].keys()) == list(eager[0].keys())
    assert ours[2] == eager[2] == 3
    for got, want in zip(_tensors(ours), _tensors(eager), strict=True):
        torch.testing.assert_close(got, want)
    assert backend.count == 1


def test_t5_decoder_step_with_encoder_outputs_passed_in() -> None:
    torch.manual_seed(0)
    model, make_inputs = _t5()
    backend = RecordingBackend()
    compiled = capture.optimize(backend, nopython=True)(model)
    with torch.no_grad():
        for _ in range(2):
            inputs = make_inputs()
            encoder_outputs = model.get_encoder()(input_ids=inputs["input_ids"])
            ours = compiled(encoder_outputs=encoder_outputs, decoder_input_ids=inputs["decoder_input_ids"])
            eager = model(encoder_outputs=encoder_outputs, decoder_input_ids=inputs["decoder_input_ids"])
            torch.testing.assert_close(ours.logits, eager.logits)
            assert ours.encoder_last_hidden_state is encoder_outputs.last_hidden_state
    assert backend.count == 1


def test_model_output_errors_match_eager() -> None:
    from transformers.modeling_outputs import BaseModelOutput

    def f(x: torch.Tensor) -> torch.Tensor:
        out = BaseModelOutput(last_hidden_state=x + 1)
        out.pop("last_hidden_state")
        return x

    compiled = capture.optimize("eager")(f)
    with pytest.raises(Exception, match="pop"):
        f(torch.randn(2))
    with pytest.raises(Exception, match="pop"):
        compiled(torch.randn(2))
