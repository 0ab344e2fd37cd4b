"""Kiln's model zoo: real architectures from tiny configs through capture, next to TorchDynamo.

Each model is called four times (same input twice, new values, a new shape); for each call the zoo
records graphs, graph breaks, recompilations, whether a compiled graph ran, and whether the outputs
match eager. `python -m tools.zoo` runs it (docs/zoo.md); tests/test_zoo_slice.py runs a slice in CI.
"""
