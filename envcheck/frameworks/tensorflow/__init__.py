"""TensorFlow: its distributions, how its build is read, and how envcheck runs it; its smoke
backend (tf.keras) is ``smoke.py`` beside this file.

A release the table lacks is judged by the rules of its packages where they decide alone:
``tensorflow-cpu`` is CPU-only, ``tensorflow`` before 2.1 and ``tensorflow-gpu`` after 2.11
are too; the table's rows are by minor, so a patch release is its minor's."""
from __future__ import annotations

from dataclasses import replace

from packaging.version import Version

from ..base import SPLIT, Build, Framework, GpuBlock, GpuOption, RunVariable, bare_build, cpu_only, minor, row_build


def _read_build(dist: str, version: Version, shown: str, local: str | None,
                packages=None) -> Build | None:
    tf = FRAMEWORK.facts()
    releases = tf["releases"]
    notes: list[str] = []
    key = f"{version.major}.{version.minor}"
    if dist == "tf-nightly":
        key = max(releases, key=Version)
        notes.append(f"tf-nightly: assumed to be built like the newest known release, {key}")
    row = releases.get(key)
    if row is None:
        known = sorted(releases, key=Version)
        notes.append(f"tensorflow {key} is not in the tables ("
                     f"{'older than the first' if Version(key) < Version(known[0]) else 'newer than the last'} "
                     f"known, {known[0]}-{known[-1]}): judged by its package alone")
    build = (row_build("tensorflow", dist, shown, row, notes) if row
             else replace(bare_build("tensorflow", dist, shown), notes=tuple(notes)))
    release = minor(Version(key))
    if dist == "tensorflow-cpu":
        return cpu_only(build, "tensorflow-cpu is the CPU-only TensorFlow package")
    if dist == "tensorflow" and release < minor(Version(tf["gpu_package_since"])):
        return cpu_only(build, tf["gpu_package_note"])
    if dist == "tensorflow-gpu" and release > minor(Version(tf["tensorflow_gpu_last"])):
        return cpu_only(build, tf["gpu_package_note"])
    return build if row else None  # a GPU package of a release whose CUDA the tables don't say


def _gpu_block(build: Build, os: str) -> GpuBlock | None:
    """TensorFlow after 2.10 has no GPU support on native Windows."""
    tf = FRAMEWORK.facts()
    if os != "windows" or minor(Version(build.version)) <= minor(Version(tf["windows_gpu_last"])):
        return None
    return GpuBlock(tf["windows_gpu_note"].rstrip("."),
                    ("use WSL2 with pip install 'tensorflow[and-cuda]'",
                     'or on native Windows: pip install "tensorflow<2.11" with CUDA 11.2 and cuDNN 8.1'))


def _gpu_options(version: Version) -> list[GpuOption]:
    """The release's GPU build from PyPI: from 2.14, ``tensorflow[and-cuda]`` brings CUDA and
    cuDNN as pip wheels on Linux; before, ``tensorflow`` (``tensorflow-gpu`` before 2.1 is
    beyond the table), its CUDA from the system."""
    public = version.public
    extra = "[and-cuda]" if minor(version) >= (2, 14) else ""
    return [GpuOption("tensorflow", public, f"tensorflow{extra}=={public}")]


FRAMEWORK = Framework(
    name="tensorflow",
    title="TensorFlow",
    distributions=("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly"),
    table="tensorflow",
    read_build=_read_build,
    multi_device="MirroredStrategy",
    batch_rule=SPLIT,
    order=0,
    # TensorFlow takes all GPU memory at start unless told to grow as it needs.
    run_variables=(RunVariable("TF_FORCE_GPU_ALLOW_GROWTH", "true"),),
    smoke_environ={"TF_CPP_MIN_LOG_LEVEL": "2"},  # its C++ INFO and WARNING lines off the runner's stderr
    smoke_scratch=("KERAS_HOME",),  # tf.keras writes keras.json there (default ~/.keras)
    example="tensorflow==2.15.0",
    cpu_presets=("tensorflow-cpu",),
    gpu_presets=("tensorflow-gpu-cuda12", "tensorflow-gpu-cuda11-wheels", "tensorflow-gpu-cuda11.2"),
    gpu_block=_gpu_block,
    aliases=("tf",),
    beyond_table="tensorflow-cpu, and tensorflow before 2.1, of any release (CPU-only)",
    gpu_options=_gpu_options,
)
