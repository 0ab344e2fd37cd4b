#!/usr/bin/env bash
# One run on a CUDA machine for the codegen-triton package, from the repository root:
#   1. the `gpu` tests of this package (real Triton kernels),
#   2. quick_gpu.py: eager vs torch.compile vs Kiln on small workloads,
#   3. if time allows, the repository's benchmark harness on a few models through `frontend.compile`.
# Without installed distributions, entry points (kiln.kernel_backends) are invisible on a bare
# PYTHONPATH, so minimal .dist-info folders declaring them are written to a temporary folder first.
set -u
ROOT=$(pwd)
export PYTHONPATH=$ROOT/packages/inductor-ir/src:$ROOT/packages/codegen-triton/src:$ROOT/packages/capture/src:$ROOT/packages/aotgrad/src:$ROOT/packages/codegen-cpp/src:$ROOT/packages/frontend/src
SHIMS=$(mktemp -d)
for pair in "codegen_triton:cuda = codegen_triton:TritonBackend" "codegen_cpp:cpu = codegen_cpp:CppBackend"; do
  name=${pair%%:*}
  info=$SHIMS/$name-0.1.0.dist-info
  mkdir -p "$info"
  printf 'Metadata-Version: 2.1\nName: %s\nVersion: 0.1.0\n' "${name//_/-}" > "$info/METADATA"
  printf '[kiln.kernel_backends]\n%s\n' "${pair#*:}" > "$info/entry_points.txt"
done
export PYTHONPATH=$PYTHONPATH:$SHIMS:$ROOT
echo "== gpu tests"
timeout "${GPU_TESTS_TIMEOUT:-200}" python3 -m pytest packages/codegen-triton/tests -m gpu -q -p no:cacheprovider -p no:warnings -n 8 2>&1 | tail -15
echo "== quick_gpu"
timeout "${QUICK_TIMEOUT:-120}" python3 packages/codegen-triton/benchmarks/quick_gpu.py 2>&1 | tail -16
echo "== tools.bench (quick subset)"
timeout "${BENCH_TIMEOUT:-60}" python3 -m tools.bench --device cuda --quick --models "${BENCH_MODELS:-pointwise_chain,softmax_layernorm,mlp}" --output-dir "${OUT:-/tmp}/bench" 2>&1 | tail -25
