"""The bare equivalent of envcheck's smoke fit on one device, for comparing wall times.

Run it with the env's own interpreter: ``ENV/bin/python bench/bare_fit.py [cpu:0]``. It
imports TensorFlow and fits the same model as envcheck/data/smoke_runner.py (Dense(32,
relu) -> Dense(1), Adam 0.01, MSE) on the same synthetic data (seed 0, 8 features) for the
same 12 steps of 32 samples, with nothing else: no memory-growth setup, no timing per step,
no placement or loss checks. It prints one JSON line: the seconds from start to the end of
the fit, measured inside the process (interpreter start-up is not included; time the
command from outside for that).
"""
import json
import os
import sys
import time

STARTED = time.perf_counter()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

STEPS, BATCH, FEATURES, SEED = 12, 32, 8, 0


def main(device: str) -> None:
    imported = time.perf_counter()
    rng = np.random.RandomState(SEED)
    x = rng.normal(size=(STEPS * BATCH, FEATURES)).astype("float32")
    w = rng.normal(size=(FEATURES, 1)).astype("float32")
    y = (x.dot(w) + 0.1 * rng.normal(size=(STEPS * BATCH, 1))).astype("float32")
    keras = tf.keras
    keras.utils.set_random_seed(SEED)
    with tf.device("/" + device.upper()):
        model = keras.Sequential([keras.Input(shape=(FEATURES,)),
                                  keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01), loss="mse")
        history = model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    done = time.perf_counter()
    print(json.dumps({"device": device, "import_s": round(imported - STARTED, 3),
                      "fit_s": round(done - imported, 3), "total_s": round(done - STARTED, 3),
                      "loss": float(history.history["loss"][-1])}))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cpu:0")
