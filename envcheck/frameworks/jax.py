"""JAX: known by its distributions and the smoke runner's Keras 3 backend; no build tables
(the reference has none), so its builds are not judged against the driver."""
from __future__ import annotations

from .base import Framework, no_build

FRAMEWORK = Framework(
    name="jax",
    title="JAX",
    distributions=("jax", "jaxlib"),
    table=None,
    read_build=no_build,
    smoke_backend="jax",
    multi_device="keras.distribution.DataParallel",
    batch_rule="split",
)
