"""compat: the reference facts as data, and the verdicts a user relies on."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from envcheck import frameworks
from envcheck.data import compat_facts as facts
from envcheck.frameworks import Build, build_from_packages, framework_build
from envcheck.host.compat import HostProfile, cuda_cc_range, judge, min_driver
from envcheck.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent


def verdict(dist: str, version: str, driver: str | None = None, ccs=(), os: str = "linux",
            python: str | None = None, **kw):
    build = framework_build(dist, version)
    assert build is not None, f"{dist} {version} unknown"
    return judge(build, HostProfile(driver, list(ccs), os, python), **kw)


# --- the examples the issue names ------------------------------------------------------------

@pytest.mark.parametrize("dist, version, driver, ccs, expected, needle", [
    ("tensorflow", "2.11.1", "450.36.06", ["7.5"], "fail", "needs driver >= 450.80.02"),
    ("tensorflow", "2.11.1", "450.80.02", ["7.5"], "ok", "450.80.02"),
    ("tensorflow", "2.15.0", "470.82.01", ["8.6"], "fail", "needs driver >= 525.60.13"),
    ("torch", "2.13.0", "550.54.15", ["8.6"], "fail", "needs driver >= 580"),
    ("tensorflow", "2.11.0", "470.82.01", ["3.0"], "fail", "below CUDA 11.2's minimum 3.5"),
    ("tensorflow", "2.21.0", "570.124.06", ["5.0"], "fail", "older than every architecture"),
    ("tensorflow", "2.21.0", "570.124.06", ["12.0"], "warn", "JIT-compiling the compute_90 PTX"),
    ("tensorflow", "2.21.0", None, ["12.0"], "warn", "the JIT needs driver >= 555.42.06"),
])
def test_issue_examples(dist, version, driver, ccs, expected, needle):
    result = verdict(dist, version, driver, ccs)
    assert result.verdict == expected, result.reasons
    assert needle in result.reasons[0]


def test_driver_fail_names_upgrade_and_an_older_build_that_fits():
    result = verdict("torch", "2.13.0", "550.54.15", ["8.6"])
    assert "upgrade the NVIDIA driver to >= 580" in result.fixes
    assert any("torch==2.10.*" in fix and "CUDA 12.8" in fix for fix in result.fixes)
    assert verdict("torch", "2.10.0", "550.54.15", ["8.6"]).verdict == "ok"


def test_driver_only_profile_still_gets_a_suggestion():
    result = verdict("tensorflow", "2.15.0", "470.82.01")  # driver known, no GPU given
    assert result.verdict == "fail"
    assert "or install tensorflow==2.14.* (CUDA 11.8)" in result.fixes[-1]


def test_ptx_jit_needs_the_toolkits_own_driver():
    # MVC lets 550.54.15 run CUDA 12.5 SASS, but JIT of 12.5.1 PTX needs 12.5 Update 1's driver.
    result = verdict("tensorflow", "2.21.0", "550.54.15", ["12.0"])
    assert result.verdict == "fail" and not result.uses_gpu
    assert "needs driver >= 555.42.06" in result.reasons[0]
    ok = verdict("tensorflow", "2.21.0", "555.42.06", ["12.0"])
    assert ok.verdict == "warn" and ok.uses_gpu


def test_sass_of_a_lower_minor_runs_on_the_same_major():
    # TF 2.21 ships sm_80, not sm_86: an RTX 3090 (8.6) runs the sm_80 code natively.
    assert verdict("tensorflow", "2.21.0", "560.35.05", ["8.6"]).verdict == "ok"
    # TF 2.11 ships sm_75 + compute_80: an A100 (8.0) must JIT.
    assert verdict("tensorflow", "2.11.0", "470.82.01", ["8.0"]).verdict == "warn"


def test_no_kernel_image_and_no_ptx_fails():
    # torch 1.13 (cu117): sm_37 ... sm_86, no PTX: an H100 (9.0) has nothing to run.
    result = verdict("torch", "1.13.1", "525.60.13", ["9.0"])
    assert result.verdict == "fail"
    assert "no kernel image for compute capability 9.0" in result.reasons[0]
    # torch 2.8 (cu128) starts at sm_70: a Pascal GPU (6.1) is too old for it.
    old = verdict("torch", "2.8.0", "570.124.06", ["6.1"])
    assert old.verdict == "fail" and "older than every architecture" in old.reasons[0]
    assert verdict("torch", "2.8.0", "570.124.06", ["7.2"]).verdict == "ok"  # sm_70 runs on 7.2


def test_every_gpu_is_judged():
    result = verdict("tensorflow", "2.21.0", "570.124.06", ["8.0", "5.2"])
    assert result.verdict == "fail"
    assert any("5.2" in reason for reason in result.reasons)


# --- python, OS, CPU-only builds, hosts without GPU -------------------------------------------

def test_python_outside_range_fails():
    result = verdict("tensorflow", "2.11.0", "470.82.01", ["7.5"], python="3.12")
    assert result.verdict == "fail"
    assert result.reasons[0] == "Python 3.12 is outside tensorflow 2.11.0's supported range 3.7-3.10"
    assert verdict("tensorflow", "2.11.0", "470.82.01", ["7.5"], python="3.10.4").verdict == "ok"


def test_tensorflow_after_2_10_has_no_gpu_on_native_windows():
    result = verdict("tensorflow", "2.15.0", "560.94", ["8.6"], os="windows")
    assert result.verdict == "warn" and not result.uses_gpu
    assert "last TensorFlow release that supported GPU on native-Windows" in result.reasons[0]
    assert any("WSL2" in fix for fix in result.fixes)
    strict = verdict("tensorflow", "2.15.0", "560.94", ["8.6"], os="windows", require_gpu=True)
    assert strict.verdict == "fail"
    assert "or install tensorflow==2.10.* (CUDA 11.2)" in strict.fixes[-1]
    assert verdict("tensorflow", "2.10.0", "472.50", ["8.6"], os="windows").uses_gpu


def test_windows_driver_floor_differs_from_linux():
    assert verdict("tensorflow", "2.10.0", "452.39", ["7.5"], os="windows").verdict == "ok"
    assert verdict("tensorflow", "2.10.0", "452.06", ["7.5"], os="windows").verdict == "fail"


@pytest.mark.parametrize("dist, version", [("tensorflow-cpu", "2.15.0"), ("torch", "2.5.1+cpu"),
                                            ("tensorflow", "1.15.0")])
def test_cpu_only_builds_are_ok_on_the_cpu(dist, version):
    result = verdict(dist, version, "550.54.15", ["8.6"])
    assert result.verdict == "ok" and not result.uses_gpu
    assert result.reasons[0].startswith("CPU-only build")
    assert verdict(dist, version, "550.54.15", ["8.6"], require_gpu=True).verdict == "fail"


def test_gpu_build_on_a_host_without_gpu_runs_on_cpu_with_a_warning():
    result = verdict("tensorflow", "2.15.0")
    assert result.verdict == "warn" and not result.uses_gpu
    assert "will run on the CPU" in result.reasons[0]
    assert verdict("tensorflow", "2.15.0", require_gpu=True).verdict == "fail"


# --- driver table -----------------------------------------------------------------------------

@pytest.mark.parametrize("cuda, os, minimum, jit, basis", [
    ("10.1", "linux", "418.39", "418.39", "table3"),
    ("10.2", "windows", "441.22", "441.22", "table3"),
    ("9.2", "linux", "396.26", "396.26", "table3"),
    ("9.2.148", "linux", "396.37", "396.37", "table3"),
    ("11.2", "linux", "450.80.02", "460.27.03", "minor-version-compatibility"),
    ("11.8", "windows", "452.39", "520.06", "minor-version-compatibility"),
    ("11.0", "linux", "450.36.06", "450.36.06", "table3"),
    ("12.8.1", "linux", "525.60.13", "570.124.06", "minor-version-compatibility"),
    ("12.8.1", "windows", "527.41", "572.61", "minor-version-compatibility"),
    ("12.6.3", "linux", "525.60.13", "560.35.05", "minor-version-compatibility"),
    ("13.0.3", "linux", "580", "580.95.05", "minor-version-compatibility"),
    ("13.2", "windows", "580", None, "minor-version-compatibility"),
    ("12", "linux", "525.60.13", None, "minor-version-compatibility"),
])
def test_min_driver(cuda, os, minimum, jit, basis):
    need = min_driver(cuda, os)
    assert (need.min_driver, need.jit_driver, need.basis) == (minimum, jit, basis)
    assert need.source.startswith("https://docs.nvidia.com/")


@pytest.mark.parametrize("cuda, expected", [
    ("9.0", ("3.0", "7.2")), ("10.2", ("3.0", "7.5")), ("11.2", ("3.5", "8.6")),
    ("11.8", ("3.5", "9.0")), ("12.5.1", ("5.0", "9.0")), ("12.8", ("5.0", "12.0")),
    ("13.0", ("7.5", None)),
])
def test_cuda_cc_range(cuda, expected):
    assert cuda_cc_range(cuda) == expected


def test_every_build_in_the_tables_resolves_driver_and_cc_range():
    checked = 0
    for framework, dists in (("tensorflow", ("tensorflow", "tensorflow-gpu")), ("torch", ("torch",))):
        for release in frameworks.get(framework).releases():
            builds = [framework_build(dist, release) for dist in dists]
            for build in (b for b in builds if b.gpu_capable):
                assert min_driver(build.cuda, "linux").min_driver
                assert min_driver(build.cuda, "windows").min_driver
                assert cuda_cc_range(build.cuda)[0]
                checked += 1
    assert checked >= 45


def test_each_table_names_its_sources():
    data = facts()
    for table in ("cuda_drivers", "minor_version_compatibility", "cuda_compute_capability",
                  "tensorflow", "torch"):
        assert data[table]["sources"] and all(s.startswith("https://") for s in data[table]["sources"])


# --- builds -----------------------------------------------------------------------------------

def test_tensorflow_build_facts():
    build = framework_build("tensorflow", "2.21.0")
    assert build == Build("tensorflow", "tensorflow", "2.21.0", "12.5.1", "9.3", "3.10", "3.13",
                          ("sm_60", "sm_70", "sm_80", "sm_89", "compute_90"), True)
    assert framework_build("tensorflow", "2.16.1").archs is None  # not established
    assert framework_build("tensorflow_gpu", "1.15.0").cuda == "10.0"
    assert not framework_build("tensorflow-gpu", "2.12.0").gpu_capable  # the erroring stub


def test_nightly_maps_to_the_newest_known_release():
    build = framework_build("tf-nightly", "2.22.0.dev20260301")
    assert build.cuda == framework_build("tensorflow", frameworks.get("tensorflow").releases()[0]).cuda
    assert "newest known release" in build.notes[0]


def test_torch_local_versions():
    assert framework_build("torch", "2.13.0").cuda == "13.0.3"
    cu118 = framework_build("torch", "2.5.1+cu118")
    assert cu118.cuda == "11.8" and cu118.gpu_capable and cu118.archs is None
    assert framework_build("torch", "2.5.1", "cu124").archs == framework_build("torch", "2.5.1").archs
    assert framework_build("torch", "2.13.0", "cu126").archs[0] == "sm_50"
    cpu = framework_build("torch", "2.13.0", "cpu")
    assert (cpu.version, cpu.gpu_capable, cpu.cuda) == ("2.13.0+cpu", False, None)


def test_unknown_releases_and_distributions_are_none():
    assert framework_build("tensorflow", "3.0.0") is None
    assert framework_build("torch", "1.9.0") is None
    assert framework_build("numpy", "2.0.0") is None


def test_build_from_packages_prefers_a_gpu_build():
    env = {"tensorflow-cpu": "2.21.0", "torch": "2.13.0", "keras": "3.10.0"}
    assert build_from_packages(env).distribution == "torch"
    assert build_from_packages({"tensorflow_cpu": "2.21.0"}).distribution == "tensorflow-cpu"
    assert build_from_packages({"tensorflow": "2.15.0", "torch": "2.5.1"}).framework == "tensorflow"
    assert build_from_packages({"numpy": "2.0"}) is None


# --- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("call, needle", [
    (lambda: framework_build("tensorflow", "two.eleven"), "'two.eleven'"),
    (lambda: min_driver("12.x"), "'12.x'"),
    (lambda: min_driver("12.4", "macos"), "'macos'"),
    (lambda: min_driver("7.5"), "CUDA 7.5"),
    (lambda: verdict("tensorflow", "2.15.0", "550.x", ["8.6"]), "'550.x'"),
    (lambda: verdict("tensorflow", "2.15.0", "550.54.15", ["sm_86"]), "'sm_86'"),
    (lambda: verdict("tensorflow", "2.15.0", "550.54.15", ["8.6"], python="three"), "'three'"),
])
def test_bad_input_is_a_usage_error_naming_it(call, needle):
    with pytest.raises(UsageError) as info:
        call()
    assert info.value.exit_code == 2 and needle in str(info.value)


def test_the_wheel_ships_the_data(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("envcheck-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"envcheck/data/compat.json", "envcheck/data/catalogue.json"} <= set(names)
