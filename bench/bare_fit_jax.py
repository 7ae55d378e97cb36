"""The bare equivalent of envcheck's pure-JAX smoke fit on one device, for comparing wall
times.

Run it with the env's own interpreter: ``ENV/bin/python bench/bare_fit_jax.py [cpu|gpu]``.
It imports jax and numpy and fits what envcheck/frameworks/jax/smoke.py fits for one device
(8 features -> 32 -> ReLU -> 1, a hand-written Adam 0.01, MSE) on the same synthetic data
(numpy seed 0, 8 features) for the same 12 steps of 32 samples, as one ``jax.jit`` train
step, with nothing else: no ahead-of-time compile, no timing per step, no placement or loss
checks. It prints one JSON line: the seconds from start to the end of the fit, measured
inside the process (interpreter start-up is not included; time the command from outside).
"""
import json
import sys
import time

STARTED = time.perf_counter()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

STEPS, BATCH, FEATURES, SEED, LR = 12, 32, 8, 0, 0.01


def loss_fn(params, x, y):
    hidden = jnp.maximum(x @ params["w1"] + params["b1"], 0.0)
    return jnp.mean((hidden @ params["w2"] + params["b2"] - y) ** 2)


@jax.jit
def step(params, m, v, t, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    t = t + 1.0
    m = jax.tree_util.tree_map(lambda a, g: 0.9 * a + 0.1 * g, m, grads)
    v = jax.tree_util.tree_map(lambda a, g: 0.999 * a + 0.001 * g * g, v, grads)
    params = jax.tree_util.tree_map(
        lambda p, a, b: p - LR * (a / (1 - 0.9 ** t)) / (jnp.sqrt(b / (1 - 0.999 ** t)) + 1e-8),
        params, m, v)
    return params, m, v, t, loss


def main(kind: str) -> None:
    imported = time.perf_counter()
    device = jax.devices(kind)[0]
    rng = np.random.RandomState(SEED)
    x = rng.normal(size=(STEPS * BATCH, FEATURES)).astype("float32")
    w = rng.normal(size=(FEATURES, 1)).astype("float32")
    y = (x.dot(w) + 0.1 * rng.normal(size=(STEPS * BATCH, 1))).astype("float32")
    batches = [(jax.device_put(x[i * BATCH:(i + 1) * BATCH], device),
                jax.device_put(y[i * BATCH:(i + 1) * BATCH], device)) for i in range(STEPS)]
    init = np.random.RandomState(SEED)
    params = {"w1": init.uniform(-FEATURES ** -0.5, FEATURES ** -0.5, (FEATURES, 32)),
              "b1": init.uniform(-FEATURES ** -0.5, FEATURES ** -0.5, (32,)),
              "w2": init.uniform(-32 ** -0.5, 32 ** -0.5, (32, 1)),
              "b2": init.uniform(-32 ** -0.5, 32 ** -0.5, (1,))}
    params = {k: jax.device_put(p.astype("float32"), device) for k, p in params.items()}
    m = {k: jnp.zeros_like(p) for k, p in params.items()}
    v = {k: jnp.zeros_like(p) for k, p in params.items()}
    t = jax.device_put(np.float32(0.0), device)
    for xb, yb in batches:
        params, m, v, t, loss = step(params, m, v, t, xb, yb)
    last = float(loss)
    done = time.perf_counter()
    print(json.dumps({"device": kind, "import_s": round(imported - STARTED, 3),
                      "fit_s": round(done - imported, 3), "total_s": round(done - STARTED, 3),
                      "loss": last}))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cpu")
