#!/usr/bin/env python3
"""How long `envcheck validate NAME --devices cpu` of a PyTorch CPU env takes to a verdict,
against a bare script that imports torch and fits the same model (bench/bare_fit_torch.py)
with the env's own interpreter: whole processes, side by side.

    python bench/bench_validate_torch.py [--home ~/.cache/envcheck-torch] [--env torch] [--runs 7]

The env must be a real envcheck env with PyTorch (make one with
`envcheck --home H env create torch --preset pytorch-cpu`). bench/bare_fit_torch.py fits what
envcheck/data/smoke_runner.py fits natively for one CPU device: Linear(8, 32) -> ReLU ->
Linear(32, 1), Adam(0.01), MSE, 12 steps of 32 samples of the same seeded data. envcheck's
bytecode is compiled first, as an installed wheel has it. One warm-up each, then ``--runs``
rounds, each running every command once, so noise hits them alike. For context (no target),
`validate --devices cpu:0,cpu:1` is timed too: the same plus DistributedDataParallel over
two gloo processes.

Target: validate median <= 1.2x the bare fit's median. Prints a markdown table and writes it,
with the command line, to bench/results/validate_torch.md (bench/validate_vs_bare.py does the
work for both frameworks). Timing only, no assertions.
"""
from __future__ import annotations

from validate_vs_bare import Bench, main

BENCH = Bench("torch", "validate of a PyTorch CPU env vs a bare fit", "pytorch-cpu", "torch",
              "bare_fit_torch.py", "+ DDP, 2 gloo processes", "DDP",
              lambda build: f"torch {build['version']} (CUDA {build['cuda_version']})")

if __name__ == "__main__":
    main(BENCH, __doc__)
