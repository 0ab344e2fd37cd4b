"""One compiled module called from several threads at once gives eager's results.

Compiling must never change the user's module (tracing swaps parameters for fake tensors only in
a copy): a thread running the module eagerly meanwhile sees real tensors. The threads run in a
subprocess, so that a crash fails the test instead of the test run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_SCRIPT = """
import sys, threading
import torch
import frontend

backend, grad = sys.argv[1], sys.argv[2] == "grad"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4))
compiled = frontend.compile(model, backend=backend)
inputs = [torch.randn(8, 16) for _ in range(4)]
with torch.no_grad():
    expected = [model(x) for x in inputs]
start = threading.Barrier(5)
results, failures = [None] * 4, []

def call_compiled(i):
    try:
        start.wait()
        with torch.set_grad_enabled(grad):
            for _ in range(5):
                results[i] = compiled(inputs[i]).detach()
    except Exception as error:
        failures.append(f"compiled call: {error!r}")

def call_eagerly():
    start.wait()
    with torch.no_grad():
        for _ in range(200):
            out = model(inputs[0])
            if type(out) is not torch.Tensor or not torch.allclose(out, expected[0], atol=1e-5):
                failures.append(f"eager call during compiling gave a {type(out).__name__}")
                return

threads = [threading.Thread(target=call_compiled, args=(i,)) for i in range(4)]
threads.append(threading.Thread(target=call_eagerly))
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
for got, want in zip(results, expected):
    if got is None or not torch.allclose(got, want, atol=1e-5):
        failures.append("a compiled result differs from eager")
print("FAILURES:", failures[:5])
sys.exit(1 if failures else 0)
"""


@pytest.mark.parametrize("backend, grad", [("inductor", "grad"), ("aot_eager", "no_grad")])
def test_four_threads_call_one_compiled_module(backend: str, grad: str) -> None:
    env = dict(os.environ, PYTHONHASHSEED="0")
    run = subprocess.run([sys.executable, "-c", _SCRIPT, backend, grad], capture_output=True, text=True,
                         timeout=600, env=env)
    assert run.returncode == 0, f"exit status {run.returncode}\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
