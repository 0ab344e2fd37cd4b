# Source this on a machine where Kiln's packages cannot be pip-installed (a GPU machine with no
# network): it puts the six packages on PYTHONPATH, installs wheels carried in .whl/ (e.g. `bytecode`)
# into a temporary folder, and writes minimal .dist-info folders so that the `kiln.kernel_backends`
# entry points are found without an install. Usage, from the repository root:
#   source tools/device_env.sh
KILN_ROOT=$(pwd)
KILN_SITE=$(mktemp -d)
if ls "$KILN_ROOT"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$KILN_SITE" "$KILN_ROOT"/.whl/*.whl
fi
for pair in "codegen_triton:cuda = codegen_triton:TritonBackend" "codegen_cpp:cpu = codegen_cpp:CppBackend"; do
  name=${pair%%:*}
  info=$KILN_SITE/$name-0.1.0.dist-info
  mkdir -p "$info"
  printf 'Metadata-Version: 2.1\nName: %s\nVersion: 0.1.0\n' "${name//_/-}" > "$info/METADATA"
  printf '[kiln.kernel_backends]\n%s\n' "${pair#*:}" > "$info/entry_points.txt"
done
for folder in capture aotgrad inductor-ir codegen-cpp codegen-triton frontend; do
  PYTHONPATH=$KILN_ROOT/packages/$folder/src${PYTHONPATH:+:$PYTHONPATH}
done
export PYTHONPATH=$PYTHONPATH:$KILN_SITE:$KILN_ROOT
export PYTHONUNBUFFERED=1
