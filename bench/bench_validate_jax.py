#!/usr/bin/env python3
"""How long `envcheck validate NAME --devices cpu` of a JAX CPU env takes to a verdict,
against a bare script that imports jax and fits the same model (bench/bare_fit_jax.py)
with the env's own interpreter: whole processes, side by side.

    python bench/bench_validate_jax.py [--home ~/.cache/envcheck-jax] [--env jx] [--runs 7]

The env must be a real envcheck env with JAX (make one with
`envcheck --home H env create jx --preset jax-cpu`). bench/bare_fit_jax.py fits what
envcheck/frameworks/jax/smoke.py fits for one CPU device, as one jitted train step:
8 -> 32 -> ReLU -> 1, a hand-written Adam(0.01), MSE, 12 steps of 32 samples of the same
seeded data. envcheck's
bytecode is compiled first, as an installed wheel has it. One warm-up each, then ``--runs``
rounds, each running every command once, so noise hits them alike. For context (no target),
`validate --devices cpu:0,cpu:1` is timed too: two host devices (XLA_FLAGS), a fit on
each, and the jitted data-parallel fit over a Mesh of both.

Target: validate median <= 1.2x the bare fit's median. Prints a markdown table and writes it,
with the command line, to bench/results/validate_jax.md (bench/validate_vs_bare.py does the
work for both frameworks). Timing only, no assertions.
"""
from __future__ import annotations

from validate_vs_bare import Bench, main

BENCH = Bench("jax", "validate of a JAX CPU env vs a bare fit", "jax-cpu", "jx",
              "bare_fit_jax.py", "2 host devices + jitted data parallel", "data-parallel",
              lambda build: f"jax {build['version']}, jaxlib {build['jaxlib_version']} "
                            f"(backend {build['default_backend']})")

if __name__ == "__main__":
    main(BENCH, __doc__)
