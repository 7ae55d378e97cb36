"""The same env on every node (issue 21): locks written by real uv, envs made from them by
real uv and pip (hashes checked, nothing resolved), a wheelhouse that makes the env with every
index unreachable, drift made by a real `pip install` and a real edit, GPU variants chosen for
a target driver on a host without NVML, and a second env linked from an intact first."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env
from test_select import envcheck

TF = """title = "tf"
kind = "cpu"
framework = "tensorflow"
requires-python = ">=3.8"
packages = ["tensorflow-cpu==2.21.0", "beta"]
"""
# A GPU preset with two variants, in order of preference: torch 2.10 (CUDA 12.8) and 2.0 (CUDA 11.7).
PTV = """title = "ptv"
kind = "gpu"
framework = "torch"
requires-python = ">=3.8"

[variants.cu12]
packages = ["torch==2.10.0"]
[variants.cu12.gpu]
cuda = "12.8"

[variants.cu11]
packages = ["torch==2.0.1"]
[variants.cu11.gpu]
cuda = "11.7"
"""
SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"


@pytest.fixture
def env(home: Path, tmp_path: Path) -> dict:
    """envcheck's environment for this test's home, with no NVML (LD_LIBRARY_PATH: an empty folder)."""
    (home / "presets").mkdir(exist_ok=True)
    (home / "presets" / "tf.toml").write_text(TF)
    (home / "presets" / "ptv.toml").write_text(PTV)
    empty = tmp_path / "no-nvml"
    empty.mkdir()
    return clean_env(ENVCHECK_HOME=str(home), LD_LIBRARY_PATH=str(empty))


def offline(wheels: Path) -> list[str]:
    return ["--no-index", "--find-links", str(wheels)]


def lock(env: dict, tmp_path: Path, wheels: Path, *args: str, name: str = "pylock.toml") -> Path:
    out = tmp_path / name
    r = envcheck(env, "env", "lock", *args, "-o", str(out), *offline(wheels))
    assert r.code == 0, r.err
    return out


def manifest(home: Path, name: str) -> dict:
    return json.loads((home / "envs" / name / "envcheck.json").read_text())


def test_a_lock_made_by_uv_makes_the_same_env_with_uv_and_with_pip(env, home, tmp_path, wheelhouse):
    assert envcheck(env, "env", "create", "tf", "--preset", "tf", *offline(wheelhouse)).code == 0
    path = lock(env, tmp_path, wheelhouse, "tf")
    text = path.read_text()
    assert 'lock-version = "1.0"' in text and "[tool.envcheck]" in text and 'variant = "cpu"' in text
    assert f"python_version == '{sys.version_info.major}.{sys.version_info.minor}'" in text  # environments

    made = {}
    for installer in ("uv", "pip"):
        r = envcheck(env, "env", "create", f"n-{installer}", "--lock", str(path), "--installer", installer,
                     "--no-link", *offline(wheelhouse), "--json")
        assert r.code == 0, r.err
        made[installer] = r.json()["env"]
        assert manifest(home, f"n-{installer}")["installer"] == installer
    tf = json.loads(envcheck(env, "env", "show", "tf", "--json").out)["env"]
    for shown in made.values():
        assert {n: v for n, v in shown["packages"].items() if n != "pip"} == tf["packages"]
        assert shown["lock"]["digest"] == json.loads(envcheck(env, "env", "lock", "tf", "-o", "-", "--json",
                                                              *offline(wheelhouse)).out)["digest"]
        assert shown["digest"] == tf["digest"]  # identical content on every node made from the lock
    listed = {e["name"]: e for e in json.loads(envcheck(env, "env", "list", "--json").out)["envs"]}
    assert listed["n-pip"]["lock"]["variant"] == "cpu" and listed["tf"]["lock"] is None
    for name in ("tf", "n-uv", "n-pip"):
        verified = envcheck(env, "env", "verify", name, "--json")
        assert verified.code == 0 and verified.json()["clean"], verified.out


def test_a_wrong_hash_is_refused_and_nothing_is_made(env, home, tmp_path, wheelhouse):
    path = lock(env, tmp_path, wheelhouse, "--preset", "tf")
    text = path.read_text()
    digest = text.split('sha256 = "')[1][:64]
    path.write_text(text.replace(digest, "0" * 64))
    r = envcheck(env, "env", "create", "x", "--lock", str(path), *offline(wheelhouse))
    assert r.code in (1, 2) and "hash" in r.err.lower()
    assert not (home / "envs" / "x").exists()


def test_drift_from_a_real_pip_install_and_from_an_edit_that_hides_itself(env, home, tmp_path, wheelhouse):
    path = lock(env, tmp_path, wheelhouse, "--preset", "tf")
    for name in ("a", "b"):
        assert envcheck(env, "env", "create", name, "--lock", str(path), "--no-link", *offline(wheelhouse)).code == 0
        assert envcheck(env, "validate", name, "--no-smoke").code == 0
    python_a = home / "envs" / "a" / "bin" / "python"
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(python_a), "install", "--no-index",
                          "--find-links", str(wheelhouse), "alpha==1.0"], capture_output=True, text=True,
                         env=clean_env(PIP_CONFIG_FILE=os.devnull))
    assert pip.returncode == 0, pip.stderr
    drift = envcheck(env, "env", "verify", "a", "--json")
    assert drift.code == 1
    assert drift.json()["packages"]["changed"] == {"alpha": {"from": "2.0", "to": "1.0"}}
    assert "drifted since validation" in envcheck(env, "check", "--env", "a", "--json").json()["reason"]

    # Same size, the modification time put back: only the change time and the bytes say it.
    target = home / "envs" / "b" / SITE / "beta" / "__init__.py"
    before, stat = target.read_bytes(), target.stat()
    edited = before.replace(b"1.0", b"6.6")
    assert len(edited) == len(before) and edited != before
    target.write_bytes(edited)
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    for mode in ((), ("--hashes",)):
        r = envcheck(env, "env", "verify", "b", "--json", *mode)
        assert r.code == 1 and r.json()["files"]["edited"] == [f"{SITE}/beta/__init__.py"], r.out
    text = envcheck(env, "env", "verify", "b")
    assert text.code == 1 and "file edited:" in text.out and "--lock" in text.out
    validated = envcheck(env, "validate", "b", "--no-smoke", "--json")
    integrity = next(c for c in validated.json()["reports"][0]["checks"] if c["id"] == "integrity")
    assert validated.code == 1 and integrity["summary"].startswith("drifted since it was made: 1 file(s) edited")


def test_an_offline_create_from_the_wheelhouse_with_every_index_unreachable(env, home, tmp_path, wheelhouse):
    wheels = tmp_path / "wheels"
    shutil.copytree(wheelhouse, wheels)
    house = tmp_path / "house"
    r = envcheck(env, "env", "lock", "--preset", "tf", "-o", str(tmp_path / "pylock.toml"), "--wheelhouse",
                 str(house), *offline(wheels), "--json")
    assert r.code == 0, r.err
    assert r.json()["wheels"] == 3 and sorted(p.name for p in house.iterdir()) == [
        "alpha-2.0-py3-none-any.whl", "beta-1.0-py3-none-any.whl", "pylock.toml",
        "tensorflow_cpu-2.21.0-py3-none-any.whl"]
    shutil.rmtree(wheels)  # the lock's URLs lead nowhere now
    dead = "http://127.0.0.1:9/simple"  # nothing listens there
    cut = {**env, "PIP_INDEX_URL": dead, "UV_INDEX_URL": dead, "UV_DEFAULT_INDEX": dead,
           "PIP_FIND_LINKS": "", "https_proxy": dead, "http_proxy": dead}
    prefix = ["unshare", "-n"] if shutil.which("unshare") and subprocess.run(
        ["unshare", "-n", "true"], capture_output=True).returncode == 0 else []
    for installer in ("uv", "pip"):
        proc = subprocess.run([*prefix, sys.executable, "-m", "envcheck", "env", "create", f"off-{installer}",
                               "--lock", str(house / "pylock.toml"), "--offline", "--installer", installer,
                               "--no-link"], capture_output=True, text=True, env=cut, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert envcheck(env, "env", "verify", f"off-{installer}").code == 0
    assert (manifest(home, "off-uv")["index"]["no_index"]) is True

    (house / "beta-1.0-py3-none-any.whl").unlink()
    r = envcheck(cut, "env", "create", "short", "--lock", str(house / "pylock.toml"), "--offline")
    assert r.code == 2 and "beta-1.0-py3-none-any.whl" in r.err and "--wheelhouse" in r.err
    assert not (home / "envs" / "short").exists()


def test_a_gpu_preset_is_locked_for_a_target_driver_on_a_host_without_nvml(env, home, tmp_path, wheelhouse):
    def locked(*target: str) -> dict:
        r = envcheck(env, "env", "lock", "--preset", "ptv", "-o", str(tmp_path / "pylock.toml"), *target,
                     *offline(wheelhouse), "--json")
        assert r.code == 0, r.err
        return r.json()

    old = locked("--for-driver", "470.82.01", "--for-cc", "7.5")  # a T4 on an R470 driver: CUDA 11 only
    assert old["target"]["variant"] == "cu11" and old["target"]["for_driver"] == "470.82.01"
    assert old["packages"]["torch"] == "2.0.1" and "nvidia-cuda-runtime-cu11" in old["packages"]
    new = locked("--for-driver", "550.54.15", "--for-cc", "8.0")
    assert new["target"]["variant"] == "cu12" and new["packages"]["torch"] == "2.10.0"

    before = (tmp_path / "pylock.toml").read_bytes()
    for target, said in ((("--for-driver", "418.40.04", "--for-cc", "7.0"), "no GPU variant of preset ptv fits"),
                         ((), "no NVIDIA GPU"),
                         (("--for-driver", "550.54.15"), "--for-driver and --for-cc go together")):
        r = envcheck(env, "env", "lock", "--preset", "ptv", "-o", str(tmp_path / "pylock.toml"), *target,
                     *offline(wheelhouse))
        assert r.code == 2 and said in r.err and "Traceback" not in r.err, r.err
        assert "cpu" not in r.out
    assert (tmp_path / "pylock.toml").read_bytes() == before  # a refusal writes nothing

    refused = envcheck(env, "env", "create", "g", "--lock", str(tmp_path / "pylock.toml"), *offline(wheelhouse))
    assert refused.code == 2 and "can't train" in refused.err and not (home / "envs" / "g").exists()
    made = envcheck(env, "env", "create", "g", "--lock", str(tmp_path / "pylock.toml"), "--for-another-host",
                    *offline(wheelhouse))
    assert made.code == 0, made.err
    assert manifest(home, "g")["lock"]["variant"] == "cu12" and manifest(home, "g")["preset"]["kind"] == "gpu"


def test_a_second_env_of_a_lock_is_linked_and_either_env_sees_an_edit(env, home, tmp_path, wheelhouse):
    path = lock(env, tmp_path, wheelhouse, "--preset", "tf")
    assert envcheck(env, "env", "create", "one", "--lock", str(path), *offline(wheelhouse)).code == 0
    second = envcheck(env, "env", "create", "two", "--lock", str(path), *offline(wheelhouse))
    assert second.code == 0 and "linked from env one" in second.err
    assert manifest(home, "two")["linked_from"] == "one"
    one, two = home / "envs" / "one" / SITE, home / "envs" / "two" / SITE
    assert (one / "beta" / "__init__.py").stat().st_ino == (two / "beta" / "__init__.py").stat().st_ino
    script = (home / "envs" / "two" / "bin" / "activate").read_text()
    assert str(home / "envs" / "two") in script and str(home / "envs" / "one") not in script
    run = subprocess.run([str(home / "envs" / "two" / "bin" / "python"), "-c",
                          "import sys, beta; print(sys.prefix, beta.__file__)"], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.split()[0] == str(home / "envs" / "two")
    for name in ("one", "two"):
        assert envcheck(env, "env", "verify", name).code == 0

    shared = two / "beta" / "__init__.py"
    data = shared.read_bytes()
    with open(shared, "r+b") as fh:  # in place: both envs hold this file
        fh.write(data.replace(b"1.0", b"7.7"))
    for name in ("one", "two"):
        r = envcheck(env, "env", "verify", name, "--json")
        assert r.code == 1 and r.json()["files"]["edited"] == [f"{SITE}/beta/__init__.py"]

    third = envcheck(env, "env", "create", "three", "--lock", str(path), *offline(wheelhouse))
    assert third.code == 0 and "drifted" in third.err and "installing instead" in third.err
    assert manifest(home, "three")["linked_from"] is None
    assert envcheck(env, "env", "verify", "three").code == 0


def test_an_env_of_the_same_preset_is_linked_and_no_link_installs(env, home, wheelhouse):
    assert envcheck(env, "env", "create", "p1", "--preset", "tf", *offline(wheelhouse)).code == 0
    assert envcheck(env, "env", "create", "p2", "--preset", "tf", "--installer", "pip", *offline(wheelhouse)).code == 0
    assert manifest(home, "p2")["linked_from"] == "p1"
    assert manifest(home, "p2")["installer"] == "pip"  # its own, for its next env add, as its index
    assert envcheck(env, "env", "create", "p3", "--preset", "tf", "--no-link", *offline(wheelhouse)).code == 0
    assert manifest(home, "p3")["linked_from"] is None
    other = envcheck(env, "env", "create", "p4", "--preset", "tf", "--add", "alpha", *offline(wheelhouse))
    assert other.code == 0 and manifest(home, "p4")["linked_from"] is None  # other requirements: no twin
    # Removing the linked env moves the change time of every file p1 shares with it; p1's times
    # are taken again, so its next check hashes nothing (and an edit is still seen: above).
    assert envcheck(env, "env", "remove", "p2", "--yes").code == 0
    after = envcheck(env, "env", "verify", "p1", "--json")
    assert after.code == 0 and after.json()["clean"] and after.json()["hashed"] == 0, after.out


def test_provision_from_a_lock_is_idempotent(env, home, tmp_path, wheelhouse):
    path = lock(env, tmp_path, wheelhouse, "--preset", "tf")
    first = envcheck(env, "provision", "--lock", str(path), "--no-smoke", *offline(wheelhouse), "--json")
    assert first.code == 0, first.out
    (outcome,) = first.json()["envs"]
    assert outcome["name"] == "tf" and outcome["action"] == "created"
    again = envcheck(env, "provision", "--lock", str(path), "--no-smoke", *offline(wheelhouse), "--json")
    assert again.json()["envs"][0]["action"] == "unchanged"
    other = lock(env, tmp_path, wheelhouse, "--preset", "ptv", "--for-driver", "550.54.15", "--for-cc", "8.0",
                 name="pylock.gpu.toml")
    stale = envcheck(env, "provision", "--lock", str(other), "--name", "tf", "--no-smoke", *offline(wheelhouse),
                     "--json")
    assert stale.code == 1 and stale.json()["envs"][0]["action"] == "stale"


@pytest.mark.parametrize("args, said", [
    (("env", "lock", "tf", "-o", "out.toml"), "is not pylock.toml or pylock.<name>.toml"),
    (("env", "lock", "-o", "pylock.toml"), "exactly one of NAME, --preset"),
    (("env", "lock", "nope", "-o", "pylock.toml"), "no env named 'nope'"),
    (("env", "lock", "--preset", "tf", "--platform", "no platform"), "bad --platform"),
    (("env", "lock", "--preset", "tf", "--platform", "x86_64-manylinux_9_99"), "uv does not know the platform"),
    (("env", "create", "x", "--lock", "missing.toml"), "lock file"),
    (("env", "create", "x", "--preset", "tf", "--offline"), "--offline makes an env from a lock"),
    (("provision", "--name", "x"), "--name goes with --lock"),
])
def test_bad_input_is_one_line_and_exit_2(env, home, tmp_path, wheelhouse, args, said):
    r = subprocess.run([sys.executable, "-m", "envcheck", *args, *offline(wheelhouse)], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.toml").exists() and not (home / "envs").exists()


def test_verify_of_an_env_that_is_not_there_is_bad_input(env, home, tmp_path):
    r = subprocess.run([sys.executable, "-m", "envcheck", "env", "verify", "nope"], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == "envcheck: error: no env named 'nope'; fix: see `envcheck env list`"


def test_lock_files_that_are_not_locks(env, tmp_path):
    from envcheck.envs.locks import parse_lock, read_lock
    from envcheck.errors import UsageError

    top = 'lock-version = "1.0"\ncreated-by = "t"\n'
    cases = {"is not TOML": "[[packages]\n",
             "pylock version 2.0 is not supported": 'lock-version = "2.0"\ncreated-by = "t"\npackages = []\n',
             "its sha256 is not 64": top + '[[packages]]\nname = "a"\nversion = "1"\n'
                                     'sdist = { url = "https://x/a-1.tar.gz", hashes = { sha256 = "00" } }\n',
             "wheels[0].hashes'": top + '[[packages]]\nname = "a"\nversion = "1"\n'
                              'wheels = [{ url = "https://x/a-1-py3-none-any.whl" }]\n'}
    for said, text in cases.items():
        path = tmp_path / "pylock.toml"
        path.write_text(text)
        with pytest.raises(UsageError) as err:
            read_lock(path)
        assert said in err.value.message
    good = parse_lock({"lock-version": "1.0", "created-by": "t", "packages": [
        {"name": "foo-bar", "version": "1.0", "wheels": [{"url": "https://x/Foo_Bar-1.0-py3-none-any.whl",
                                                         "hashes": {"sha256": "a" * 64}}]}]}, "sha256:x")
    assert [(p.name, p.version) for p in good.packages] == [("foo-bar", "1.0")]


def test_preset_variants_are_parsed_in_order_and_checked(tmp_path):
    from envcheck.envs.presets import load_preset_file
    from envcheck.errors import UsageError

    path = tmp_path / "ptv.toml"
    path.write_text(PTV)
    preset = load_preset_file(path)
    assert preset.variant == "cu12" and [v.variant for v in preset.variants] == ["cu12", "cu11"]
    assert preset.with_variant("cu11").cuda == "11.7" and preset.content_hash != preset.with_variant("cu11").content_hash
    path.write_text(PTV.replace("[variants.cu11.gpu]", "[variants.cu11.gpus]"))
    with pytest.raises(UsageError) as err:
        load_preset_file(path)
    assert "variants.cu11.gpus" in err.value.message
    plain = tmp_path / "tf.toml"
    plain.write_text(TF)
    assert load_preset_file(plain).variant == "cpu" and load_preset_file(plain).variants == ()


def test_clone_says_when_files_cannot_be_linked(tmp_path):
    from envcheck.envs.linking import LinkUnavailable, clone

    other = Path("/dev/shm")
    if not other.is_dir() or other.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second filesystem here (/dev/shm)")
    source = other / f"envcheck-test-{os.getpid()}"
    (source / "bin").mkdir(parents=True)
    (source / "bin" / "tool").write_text(f"#!{source}/bin/python\n")
    target = tmp_path / "target"
    target.mkdir()
    try:
        with pytest.raises(LinkUnavailable) as err:
            clone(source, target)
        assert "different filesystems" in str(err.value)
        assert list(target.iterdir()) == []
    finally:
        shutil.rmtree(source)


@pytest.mark.slow
def test_the_real_tensorflow_cpu_preset_locked_made_validated_then_drifted_by_pip(tf_home, tmp_path):
    """The real thing end to end: `env lock` of the tensorflow-cpu env through uv (the package
    index), an env made from that lock by uv with every hash checked, clean by `env verify`
    (both modes) and ready with a real Keras fit; then a real `pip install` of another six
    into it is named by `env verify`, and `check` answers "drifted since validation"."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "cache").symlink_to(tf_home / "cache", target_is_directory=True)  # uv's cache: warm
    env = clean_env(ENVCHECK_HOME=str(home))
    path = tmp_path / "pylock.toml"
    made = envcheck(clean_env(ENVCHECK_HOME=str(tf_home)), "env", "lock", "tf", "-o", str(path))
    assert made.code == 0, made.err
    text = path.read_text()
    assert 'name = "tensorflow-cpu"' in text and "sha256" in text and "[tool.envcheck]" in text

    created = envcheck(env, "env", "create", "locked", "--lock", str(path))
    assert created.code == 0, created.err
    record = manifest(home, "locked")
    assert record["lock"]["digest"].startswith("sha256:") and "tensorflow-cpu" in record["packages"]
    for mode in ((), ("--hashes",)):
        clean = envcheck(env, "env", "verify", "locked", "--json", *mode)
        assert clean.code == 0 and clean.json()["clean"] and clean.json()["checked"] > 10_000, clean.out
    validated = envcheck(env, "validate", "locked", "--devices", "cpu", "--json")
    assert validated.code == 0 and validated.json()["reports"][0]["verdict"] == "ready", validated.out

    python = home / "envs" / "locked" / "bin" / "python"
    before = record["packages"]["six"]
    other = "1.16.0" if before != "1.16.0" else "1.15.0"
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                          f"six=={other}"], capture_output=True, text=True, env=clean_env())
    assert pip.returncode == 0, pip.stderr
    drift = envcheck(env, "env", "verify", "locked", "--json")
    assert drift.code == 1 and drift.json()["packages"]["changed"] == {"six": {"from": before, "to": other}}
    gate = envcheck(env, "check", "--env", "locked", "--json")
    assert gate.code == 1 and gate.json()["reason"].startswith("drifted since validation"), gate.out
