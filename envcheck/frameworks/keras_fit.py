"""The smoke fit on Keras, for the backends that train through it (``tensorflow/smoke.py``:
tf.keras; a Keras 3 backend of another framework could too). Loaded by path by those backends inside the
env's interpreter, never imported by envcheck: standard library and Keras only, Python 3.7.

Per device: memory growth is turned on before anything initialises (by the backend), a
Dense(32, relu) -> Dense(1) model is fitted inside the device's scope, timed per step by a
callback that reads the loss (so the step has finished).
"""
import time

import envcheck_smoke as kit


class Backend(object):
    """The Keras fit. Subclasses provide the framework's parts: build(), gpus_seen,
    check_visible(), scope(), numpy(), device_of(), multi_replica()."""

    name = ""

    def __init__(self, job):
        self.job = job
        self.keras = None

    def make_model(self):
        keras = self.keras
        if hasattr(keras.utils, "set_random_seed"):
            keras.utils.set_random_seed(self.job["seed"])
        model = keras.Sequential([
            keras.Input(shape=(kit.FEATURES,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(1),
        ])
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01), loss="mse")
        return model

    def timer(self):
        times = []
        keras = self.keras

        class StepTimer(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                self.start = time.perf_counter()

            def on_train_batch_end(self, batch, logs=None):
                float((logs or {}).get("loss", 0.0))  # reading the loss waits for the step
                times.append(time.perf_counter() - self.start)

        return StepTimer(), times

    def fit(self, model, x, y, batch):
        callback, times = self.timer()
        model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0,
                  callbacks=[callback])
        if len(times) < 2:
            raise RuntimeError("the fit ran %d steps, expected %d" % (len(times), len(x) // batch))
        return kit.median(times[1:]) * 1000.0

    def run_device(self, device):
        job = self.job
        x, y = kit.make_data(job["seed"], job["steps"] * job["batch"])
        probe_x, probe_y = x[:job["batch"]], y[:job["batch"]]
        self.check_visible(device)
        with self.scope(device):
            model = self.make_model()
            loss_first = kit.mse(self.numpy(model(probe_x)), probe_y)
            ms = self.fit(model, x, y, job["batch"])
            out = model(probe_x)
            loss_last = kit.mse(self.numpy(out), probe_y)
        placed = self.device_of(out)
        weights = self.device_of(model.weights[0])
        result = {"device": device, "status": "pass", "ms_per_step": round(ms, 3),
                  "loss_first": loss_first, "loss_last": loss_last, "placed_on": placed,
                  "error": None}
        problems = []
        if not loss_last < loss_first:
            problems.append("loss did not fall (%.6g -> %.6g)" % (loss_first, loss_last))
        if placed != device or weights != device:
            problems.append("ran on %s (weights on %s), not on %s" % (placed, weights, device))
        if problems:
            result.update(status="fail", error="; ".join(problems))
        return result
