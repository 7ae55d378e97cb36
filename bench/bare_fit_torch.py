"""The bare equivalent of envcheck's native PyTorch smoke fit on one device, for comparing
wall times.

Run it with the env's own interpreter: ``ENV/bin/python bench/bare_fit_torch.py [cpu|cuda:0]``.
It imports torch and numpy and fits what envcheck/data/smoke_runner.py fits for one device
(Linear(8, 32) -> ReLU -> Linear(32, 1), Adam 0.01, MSE) on the same synthetic data (numpy
seed 0, 8 features) for the same 12 steps of 32 samples, with nothing else: no timing per
step, no placement, memory or loss checks. It prints one JSON line: the seconds from start
to the end of the fit, measured inside the process (interpreter start-up is not included;
time the command from outside for that).
"""
import json
import sys
import time

STARTED = time.perf_counter()

import numpy as np  # noqa: E402
import torch  # noqa: E402

STEPS, BATCH, FEATURES, SEED = 12, 32, 8, 0


def main(device: str) -> None:
    imported = time.perf_counter()
    rng = np.random.RandomState(SEED)
    x = rng.normal(size=(STEPS * BATCH, FEATURES)).astype("float32")
    w = rng.normal(size=(FEATURES, 1)).astype("float32")
    y = (x.dot(w) + 0.1 * rng.normal(size=(STEPS * BATCH, 1))).astype("float32")
    xs, ys = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
    torch.manual_seed(SEED)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = torch.nn.MSELoss()
    for step in range(STEPS):
        optimizer.zero_grad()
        loss = loss_fn(model(xs[step * BATCH:(step + 1) * BATCH]),
                       ys[step * BATCH:(step + 1) * BATCH])
        loss.backward()
        optimizer.step()
    last = float(loss)
    done = time.perf_counter()
    print(json.dumps({"device": device, "import_s": round(imported - STARTED, 3),
                      "fit_s": round(done - imported, 3), "total_s": round(done - STARTED, 3),
                      "loss": last}))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cpu")
