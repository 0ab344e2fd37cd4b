"""Kiln's differential fuzzer: random torch programs, run eagerly and through Kiln, compared.

Pipeline: `generator.generate(seed)` builds a well-typed program from the grammar (`rules_*`),
validated by eager PyTorch itself; `worker` (a subprocess, so crashes are contained) runs it eagerly,
in float64 and through a Kiln target (`execute`) and `compare`s; `runner` shrinks each failure
(`shrink`), deduplicates it by signature and writes a pytest file (`report`). Run it with
``python -m tools.fuzz`` or ``nox -s fuzz``; see docs/testing.md.
"""
