"""Kiln's repository tools: the architecture check, the docs check and the benchmark harness (`tools.bench`)."""
