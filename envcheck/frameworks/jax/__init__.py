"""JAX: known by its distributions and the smoke runner's Keras 3 backend; no build tables
(the reference has none), so its builds are not judged against the driver. Its smoke
backend (Keras 3 on JAX) is ``smoke.py`` beside this file."""
from __future__ import annotations

from ..base import SPLIT, Framework, no_build

FRAMEWORK = Framework(
    name="jax",
    title="JAX",
    distributions=("jax", "jaxlib"),
    table=None,
    read_build=no_build,
    multi_device="keras.distribution.DataParallel",
    batch_rule=SPLIT,
    order=2,
    smoke_scratch=("KERAS_HOME",),  # Keras 3 writes keras.json there (default ~/.keras)
)
