"""Bring your own env (issue 28): a real venv (pip), a real uv project, a pyenv Python judged as a
system interpreter, and a conda-layout prefix adopted and judged without being changed.

No conda channel can be reached here: ``conda_prefix`` is a stand-in, laid out as conda lays
out an env (a real Python at ``bin/python`` whose ``sys.prefix`` is the prefix, packages in its
``site-packages`` with ``INSTALLER`` "conda", and ``conda-meta/*.json`` records in conda's own
format), and says so.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import clean_env
from test_select import envcheck

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
BASE = Path(sys.base_prefix)


def pip_env() -> dict[str, str]:
    """pip with no configuration of this machine's (its mirrors and find-links): the tests' wheels only."""
    return {**{k: v for k, v in clean_env().items() if not k.startswith("PIP_")}, "PIP_CONFIG_FILE": os.devnull}


def checksums(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (links by target) and its sha256: what 'byte for byte' compares."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
    return out


@pytest.fixture
def env(home: Path, tmp_path: Path) -> dict:
    empty = tmp_path / "no-nvml"
    empty.mkdir()
    return clean_env(ENVCHECK_HOME=str(home), LD_LIBRARY_PATH=str(empty))


@pytest.fixture
def user_venv(tmp_path: Path, wheelhouse: Path) -> Path:
    """A venv of the user's own (stdlib venv, its pip), a framework stand-in installed by pip."""
    venv = tmp_path / "myvenv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--find-links",
                    str(wheelhouse), "tensorflow-cpu==2.21.0", "beta"], check=True, timeout=300,
                   env=pip_env())
    return venv


def conda_prefix(folder: Path, wheelhouse: Path, packages: dict[str, str], records: dict[str, tuple[str, str]]) -> Path:
    """The conda stand-in (see the module docstring): ``packages`` {wheel stem: ...} unpacked into
    its site-packages as conda installs them, ``records`` {name: (version, build)} in conda-meta."""
    real = BASE / "bin" / f"python{PY}"
    (folder / "bin").mkdir(parents=True)
    shutil.copy2(real, folder / "bin" / f"python{PY}")
    (folder / "bin" / "python").symlink_to(f"python{PY}")
    stdlib = folder / "lib" / f"python{PY}"
    stdlib.mkdir(parents=True)
    for entry in (BASE / "lib" / f"python{PY}").iterdir():  # the landmarks that make it its own prefix
        if entry.name != "site-packages":
            (stdlib / entry.name).symlink_to(entry)
    site = stdlib / "site-packages"
    site.mkdir()
    for stem in packages:
        with zipfile.ZipFile(next(wheelhouse.glob(f"{stem}-py3-none-any.whl"))) as zf:
            zf.extractall(site)
        info = next(site.glob(f"{stem}.dist-info"))
        (info / "INSTALLER").write_text("conda\n")
    meta = folder / "conda-meta"
    meta.mkdir()
    for name, (version, build) in {"python": (f"{PY}.0", "h0_0_cpython"), **records}.items():
        (meta / f"{name}-{version}-{build}.json").write_text(json.dumps({
            "name": name, "version": version, "build": build, "build_number": 0,
            "channel": "https://conda.anaconda.org/conda-forge/linux-64", "subdir": "linux-64",
            "depends": [], "files": [], "fn": f"{name}-{version}-{build}.conda"}))
    return folder


def test_a_venv_is_adopted_read_and_forgotten_byte_for_byte(env, home, user_venv):
    before = checksums(user_venv)
    r = envcheck(env, "env", "adopt", "mine", str(user_venv), "--json")
    assert r.code == 0, r.err
    shown = r.json()["env"]
    assert shown["adopted"]["kind"] == "venv" and shown["adopted"]["path"] == str(user_venv.resolve())
    assert shown["packages"]["tensorflow-cpu"] == "2.21.0" and shown["frameworks"] == ["tensorflow"]
    listed = {e["name"]: e for e in envcheck(env, "env", "list", "--json").json()["envs"]}
    assert listed["mine"]["adopted"]["kind"] == "venv"
    assert "adopted venv" in envcheck(env, "env", "list").out

    added = envcheck(env, "env", "add", "mine", "alpha")  # never ours to change: its own installer's command
    assert added.code == 2 and f"{user_venv.resolve()}/bin/python -m pip install alpha" in added.err
    kernel = envcheck(env, "kernel", "install", "mine")
    assert kernel.code == 2 and "ipykernel" in kernel.err and "-m pip install ipykernel" in kernel.err
    validated = envcheck(env, "validate", "mine", "--no-smoke", "--json")
    assert validated.json()["reports"][0]["env"] == "mine", validated.err
    assert envcheck(env, "check", "--env", "mine", "--json").json()["cached"]  # its stored report answers
    assert envcheck(env, "env", "verify", "mine").code == 0
    assert (home / "envs" / "mine" / "envcheck-report.json").is_file()  # kept in the home, not in the env
    removed = envcheck(env, "env", "remove", "mine", "--yes")
    assert removed.code == 0 and "forgot adopted env mine" in removed.out
    assert checksums(user_venv) == before  # every file as it was, no bytecode written
    assert not (home / "envs" / "mine").exists()


def test_env_adopt_says_the_same_with_and_without_click(env, home, user_venv, monkeypatch, capsys):
    """`env adopt NAME PATH [--json]` is answered without click (``cli.fast.fast_adopt``, for its
    speed target); any other spelling goes through click. Both say the same, errors included."""
    from envcheck.cli.fast import fast_adopt

    def without_times(doc: dict) -> dict:
        return {**doc, "env": {k: v for k, v in doc["env"].items() if k not in ("created", "updated")}}

    said = {}
    for path, spelling in (("fast", ("mine", str(user_venv), "--json")), ("click", ("--json", "mine", str(user_venv))),
                           ("fast-text", ("mine", str(user_venv))), ("click-text", ("mine", "--", str(user_venv)))):
        done = envcheck(env, "env", "adopt", *spelling)
        assert done.code == 0, done.err
        again = envcheck(env, "env", "adopt", *(a.replace("mine", "other") for a in spelling))
        said[path] = (done.json() if "--json" in spelling else done.out, again.code, again.err)
        assert envcheck(env, "env", "remove", "mine", "--yes").code == 0
    assert said["fast"][0]["env"]["adopted"]["kind"] == "venv"
    assert (without_times(said["fast"][0]), *said["fast"][1:]) == (without_times(said["click"][0]), *said["click"][1:])
    assert said["fast-text"] == said["click-text"] and said["fast"][1] == 2
    assert said["fast"][2].strip() == f"envcheck: error: {user_venv.resolve()} is adopted already, as env mine; " \
                                      "fix: use env mine, or forget it first: envcheck env remove mine"

    monkeypatch.setenv("ENVCHECK_HOME", str(home))  # which spellings the fast path answers
    assert fast_adopt(["env", "adopt", "--json", "x", str(user_venv)]) is None
    assert fast_adopt(["env", "adopt", "x", str(user_venv), "--help"]) is None
    assert fast_adopt(["--home", str(user_venv / "pyvenv.cfg"), "env", "adopt", "x", str(user_venv)]) is None
    assert fast_adopt(["-q", "env", "adopt", "x", str(user_venv)]) == 0 and "as env x" in capsys.readouterr().out
    assert not (home / "envs" / "mine").exists() and (home / "envs" / "x").is_dir()


def test_drift_since_adoption_is_seen_and_the_users_own_installs_are_theirs(env, home, user_venv, wheelhouse):
    assert envcheck(env, "env", "adopt", "mine", str(user_venv)).code == 0
    from wheelhouse import build_wheel

    build_wheel(wheelhouse.parent / "more", "delta", "1.0")
    subprocess.run([str(user_venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--find-links",
                    str(wheelhouse.parent / "more"), "delta"], check=True, env=pip_env())
    verified = envcheck(env, "env", "verify", "mine", "--json")
    assert verified.code == 1 and verified.json()["packages"]["added"] == {"delta": "1.0"}
    assert "-m pip uninstall -y delta" in verified.json()["fix"]
    integrity = next(c for c in envcheck(env, "validate", "mine", "--no-smoke", "--json").json()["reports"][0]["checks"]
                     if c["id"] == "integrity")
    assert integrity["status"] == "pass" and "since adoption: 1 package(s) added" in integrity["summary"], integrity


def test_a_uv_project_is_adopted_by_its_folder_and_adds_with_uv_add(env, home, tmp_path, wheelhouse):
    from uv import find_uv_bin

    project = tmp_path / "proj"
    uv_env = clean_env(UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never")
    subprocess.run([find_uv_bin(), "init", "--quiet", "--no-workspace", "--python", sys.executable, str(project)],
                   check=True, env=uv_env, timeout=300)
    subprocess.run([find_uv_bin(), "add", "--quiet", "--no-index", "--find-links", str(wheelhouse), "--python",
                    sys.executable, "tensorflow-cpu==2.21.0"], check=True, cwd=project, env=uv_env, timeout=300)
    before = checksums(project)
    r = envcheck(env, "env", "adopt", "proj", str(project), "--json")
    assert r.code == 0, r.err
    adopted = r.json()["env"]["adopted"]
    assert adopted["kind"] == "uv-project" and adopted["project"] == str(project.resolve())
    assert adopted["path"] == str((project / ".venv").resolve())
    again = envcheck(env, "env", "adopt", "other", str(project / ".venv"))
    assert again.code == 2 and "adopted already, as env proj" in again.err
    added = envcheck(env, "env", "add", "proj", "alpha")
    assert added.code == 2 and f"cd {project.resolve()} && uv add alpha" in added.err
    assert envcheck(env, "validate", "proj", "--no-smoke").code in (0, 1)
    assert checksums(project) == before


def test_a_pyenv_python_is_judged_once_as_a_system_interpreter(env, home):
    python = BASE / "bin" / f"python{PY}"
    r = envcheck(env, "validate", "--python", str(python), "--no-smoke", "--json")
    assert r.code in (0, 1), r.err
    (report,) = r.json()["reports"]
    assert report["env"] == python.name and not (home / "envs").exists()  # judged once, kept nowhere
    kept = envcheck(env, "check", "--python", str(python), "--adopt", "base", "--json")
    assert kept.json()["env"] == "base"
    shown = envcheck(env, "env", "show", "base", "--json").json()["env"]
    assert shown["adopted"]["kind"] == "system" and shown["adopted"]["interpreter"] == str(python)


def test_a_conda_prefix_stand_in_reads_its_records_and_locks_only_the_pip_part(env, home, tmp_path, wheelhouse):
    prefix = conda_prefix(tmp_path / "miniconda3" / "envs" / "train", wheelhouse, {"alpha-2.0": None},
                          {"cudatoolkit": ("11.8.0", "h4ba93d1_13"), "cudnn": ("8.9.7.29", "hcdd5f01_2")})
    subprocess.run([str(prefix / "bin" / "python"), "-m", "ensurepip", "--help"], capture_output=True)
    probe = subprocess.run([str(prefix / "bin" / "python"), "-I", "-c", "import sys; print(sys.prefix)"],
                           capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == str(prefix)  # the stand-in is its own prefix, as a conda env is
    (prefix / "lib" / "libcudnn.so.8").write_text("")  # conda's cudnn, as its package lays it out
    elsewhere = tmp_path / "opt-cudnn"
    elsewhere.mkdir()
    (elsewhere / "libcudnn.so.8").write_text("")
    before = checksums(prefix)
    r = envcheck({**env, "LD_LIBRARY_PATH": f"{env['LD_LIBRARY_PATH']}:{elsewhere}"}, "env", "adopt", "train",
                 str(prefix), "--json")
    assert r.code == 0, r.err
    adopted = r.json()["env"]["adopted"]
    assert adopted["kind"] == "conda"
    manifest = json.loads((home / "envs" / "train" / "envcheck.json").read_text())
    assert manifest["adopted"]["conda"]["cudatoolkit"] == "11.8.0"
    # where the loader would take each CUDA library from: LD_LIBRARY_PATH before the prefix's own
    assert [p["from"] for p in manifest["adopted"]["libraries"]["libcudnn.so.8"]][:2] == ["LD_LIBRARY_PATH", "conda"]
    assert f"{elsewhere}/libcudnn.so.8 (LD_LIBRARY_PATH, loaded)" in envcheck(env, "env", "show", "train").out
    added = envcheck(env, "env", "add", "train", "beta")
    assert added.code == 2 and f"conda install -p {prefix.resolve()} beta" in added.err
    assert checksums(prefix) == before


@pytest.mark.parametrize("make, said", [
    (lambda p: p.mkdir(), "no env"),
    (lambda p: p.symlink_to(p.parent / "nowhere"), "a broken symbolic link"),
    (lambda p: (p.write_text("#!/bin/sh\nexec sleep 60\n"), p.chmod(0o755)), "did not answer"),
    (lambda p: p.symlink_to(Path.home() / ".pyenv" / "versions" / "2.7.18" / "bin" / "python2.7"), "Python 2"),
])
def test_bad_paths_are_one_line_exit_2_and_nothing_changed(env, home, tmp_path, make, said, monkeypatch):
    path = tmp_path / "given"
    make(path)
    if "Python 2" in said and not path.exists():
        pytest.skip("no Python 2.7 under pyenv here")
    import envcheck.envs.adopted as adopted

    cmd = [sys.executable, "-c", "import sys, envcheck.envs.adopted as a; a.PROBE_TIMEOUT = 2.0; "
           "from envcheck.cli import run; sys.argv = ['envcheck', 'env', 'adopt', 'x', sys.argv[1]]; run()", str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (home / "envs").exists() and adopted.PROBE_TIMEOUT == 20.0


def test_a_uv_project_without_its_venv_names_uv_sync(env, home, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "proj"\nversion = "0"\n')
    (project / "uv.lock").write_text("version = 1\n")

    done = envcheck(env, "env", "adopt", "proj", str(project))

    assert done.code == 2 and f"a uv project without its .venv; fix: make it first: cd {project.resolve()} && uv sync" \
        in done.err and len(done.err.strip().splitlines()) == 1, done.err
    assert not (home / "envs").exists()


def test_a_path_refused_before_its_probe_runs_nothing_of_the_env(env, home, tmp_path):
    """The probe starts before the command line has parsed its arguments (``probe_ahead``): a
    path adoption refuses before probing, one inside envcheck's home, runs nothing there."""
    ran = tmp_path / "ran"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ntouch '{ran}'\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    (home / "envs" / "made" / "bin").mkdir(parents=True)
    (home / "envs" / "made" / "bin" / "python").symlink_to(python)

    inside = envcheck(env, "env", "adopt", "inside", str(home / "envs" / "made"))
    assert inside.code == 2 and "inside envcheck's home" in inside.err and not ran.exists(), inside.err
    assert envcheck(env, "env", "adopt", "mine", str(python)).code == 0 and ran.exists()


def test_the_home_itself_and_a_deleted_env(env, home, user_venv, wheelhouse):
    (home / "presets").mkdir()
    (home / "presets" / "t.toml").write_text('title = "t"\nkind = "cpu"\nframework = "tensorflow"\n'
                                             'packages = ["tensorflow-cpu==2.21.0"]\n')
    assert envcheck(env, "env", "create", "made", "--preset", "t", "--no-index", "--find-links", str(wheelhouse)).code == 0
    inside = envcheck(env, "env", "adopt", "twice", str(home / "envs" / "made"))
    assert inside.code == 2 and "inside envcheck's home" in inside.err
    assert envcheck(env, "env", "adopt", "mine", str(user_venv)).code == 0
    shutil.rmtree(user_venv)
    listed = {e["name"]: e for e in envcheck(env, "env", "list", "--json").json()["envs"]}
    assert listed["mine"]["state"] == "missing"
    gone = envcheck(env, "validate", "mine", "--no-smoke")
    assert gone.code == 1 and "envcheck env remove mine" in gone.out + gone.err
    assert envcheck(env, "env", "remove", "mine", "--yes").code == 0


def test_the_active_env_is_judged_first_and_said(env, home, user_venv):
    r = envcheck({**env, "VIRTUAL_ENV": str(user_venv)}, "validate", "--no-smoke", "--json")
    assert "judging the active env myvenv (VIRTUAL_ENV=" in r.err
    assert r.json()["reports"][0]["env"] == "myvenv" and not (home / "envs").exists()


def test_ensure_ready_in_the_users_own_env_where_envcheck_is_installed(env, home, tmp_path, wheelhouse):
    """`pip install envcheck` into the user's env: ensure_ready answers for that interpreter,
    naming no env and claiming no preset."""
    from ray_cluster import envcheck_of_version

    bin_dir = envcheck_of_version(tmp_path / "theirs", tmp_path / "wheels", "0.1.0")
    subprocess.run([sys.executable, "-m", "uv", "pip", "install", "--python", str(bin_dir / "python"), "--no-index",
                    "--find-links", str(wheelhouse), "--quiet", "tensorflow-cpu==2.21.0"], check=True)
    code = ("import envcheck, json\ntry:\n    r = envcheck.ensure_ready()\n    print(json.dumps([r['env'], r['verdict']]))\n"
            "except envcheck.NotReady as e:\n    print(json.dumps(['not-ready', str(e)]))\n")
    done = subprocess.run([str(bin_dir / "python"), "-c", code], capture_output=True, text=True,
                          env={k: v for k, v in env.items() if k != "ENVCHECK_HOME"}, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    name, verdict = json.loads(done.stdout)
    assert name == "theirs" and verdict in ("ready", "degraded")
    # adopted with that envcheck, judged by this one (another installation): the env is the same env
    adopt = subprocess.run([str(bin_dir / "envcheck"), "env", "adopt", "theirs", str(tmp_path / "theirs")],
                           capture_output=True, text=True, env=env, timeout=300)
    assert adopt.returncode == 0, adopt.stderr
    assert envcheck(env, "validate", "theirs", "--no-smoke").code in (0, 1)
    assert envcheck(env, "check", "--env", "theirs", "--json").json()["env"] == "theirs"


# -- why the framework can't use the GPU, said for any env (issue 28, point 5) -----------------

A100_550 = {"FAKE_NVML_GPUS": "NVIDIA A100-SXM4-80GB,8.0,81920", "FAKE_NVML_DRIVER": "550.54.15",
            "FAKE_NVML_CUDA": "12040"}


def venv_with(tmp_path: Path, *wheel_dirs: Path, packages: tuple[str, ...]) -> Path:
    venv = tmp_path / "gpuvenv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    links = [arg for d in wheel_dirs for arg in ("--find-links", str(d))]
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", *links, *packages],
                   check=True, timeout=300, env=pip_env())
    return venv


def checks_of(result) -> dict:
    return {c["id"]: c for c in result.json()["reports"][0]["checks"]}


def test_a_cpu_build_beside_a_usable_gpu_is_degraded_with_the_gpu_build_to_install(fake_nvml, home, tmp_path,
                                                                                   local_wheels):
    venv = venv_with(tmp_path, local_wheels, packages=("torch==2.13.0+cpu",))
    env = fake_nvml.env(ENVCHECK_HOME=str(home), **{k: v for k, v in A100_550.items() if k != "FAKE_NVML_GPUS"})
    r = fake_nvml.cli(env, "validate", "--python", str(venv), "--no-smoke", "--json")
    compat = checks_of(r)["compat"]
    assert r.json()["reports"][0]["verdict"] == "degraded" and compat["status"] == "warn"
    assert "CPU-only" in compat["summary"] and "will ignore this host's 1 GPU(s)" in compat["summary"]
    # the newest build of 2.13 that trains on an A100 with driver 550: CUDA 12.6 from PyTorch's index
    python = venv / "bin" / "python"
    assert compat["fix"] == (f"{python} -m pip uninstall -y torch && {python} -m pip install torch==2.13.0 "
                             "--index-url https://download.pytorch.org/whl/cu126")


def test_an_older_cuda_library_in_ld_library_path_shadowing_the_envs_own_is_named(fake_nvml, home, tmp_path, wheelhouse):
    from wheelhouse import build_wheel

    more = tmp_path / "more"
    build_wheel(more, "nvidia-cudnn-cu12", "9.10.2.21",
                files={"nvidia/cudnn/lib/libcudnn.so.9": "", "nvidia/__init__.py": ""})
    venv = venv_with(tmp_path, more, wheelhouse, packages=("torch==2.10.0",))
    old = tmp_path / "cuda-12.1" / "lib64"
    old.mkdir(parents=True)
    (old / "libcudnn.so.9.0.0").write_text("")
    (old / "libcudnn.so.9").symlink_to("libcudnn.so.9.0.0")
    env = fake_nvml.env(ENVCHECK_HOME=str(home), **{k: v for k, v in A100_550.items() if k != "FAKE_NVML_GPUS"})
    env["LD_LIBRARY_PATH"] = f"{env['LD_LIBRARY_PATH']}:{old}"
    libraries = checks_of(fake_nvml.cli(env, "validate", "--python", str(venv), "--no-smoke", "--json"))["libraries"]
    assert libraries["status"] == "warn", libraries
    assert f"{old}/libcudnn.so.9 (libcudnn.so.9.0.0) is loaded before the env's own libcudnn.so.9" in libraries["summary"]
    assert libraries["fix"] == f"take {old} out of LD_LIBRARY_PATH when running in this env"


def test_a_conda_cuda_older_than_the_build_and_a_mismatched_nvcc_are_named(fake_nvml, home, tmp_path, wheelhouse):
    prefix = conda_prefix(tmp_path / "conda" / "envs" / "dl", wheelhouse,
                          {"torch-2.10.0": None, "nvidia_cuda_runtime_cu12-12.8.90": None,
                           "nvidia_cudnn_cu12-9.10.2.21": None},
                          {"cuda-version": ("11.8", "h70ddcb2_3")})
    env = fake_nvml.env(ENVCHECK_HOME=str(home), **{k: v for k, v in A100_550.items() if k != "FAKE_NVML_GPUS"})
    libraries = checks_of(fake_nvml.cli(env, "validate", "--python", str(prefix), "--no-smoke", "--json"))["libraries"]
    assert libraries["status"] == "fail" and "the conda env's CUDA 11.8 is older than the CUDA 12.8" in libraries["summary"]
    assert libraries["fix"] == f"conda install -p {prefix.resolve()} cuda-version=12.8"

    from wheelhouse import build_wheel

    build_wheel(tmp_path / "tools", "ninja", "1.11.1")  # an env that builds CUDA extensions
    venv = venv_with(tmp_path, tmp_path / "tools", wheelhouse, packages=("torch==2.10.0", "ninja"))
    bin_dir = tmp_path / "cuda-11.8" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 11.8, V11.8.89'\n")
    (bin_dir / "nvcc").chmod(0o755)
    libraries = checks_of(fake_nvml.cli({**env, "PATH": f"{bin_dir}:{env['PATH']}"}, "validate", "--python",
                                        str(venv), "--no-smoke", "--json"))["libraries"]
    assert libraries["status"] == "warn" and "the host's nvcc 11.8" in libraries["summary"]
    assert "CUDA extensions built here won't load" in libraries["summary"] and "CUDA_HOME" in libraries["fix"]


def test_the_builds_own_architectures_decide_not_the_tables():
    from envcheck.frameworks import framework_build
    from envcheck.host.probe import Gpu, HostState
    from envcheck.validation.gpu_use import arch_problem

    build = framework_build("torch", "2.5.1+cu124")
    blackwell = HostState("ok", driver_version="575.51.03", cuda_driver_version="12.9",
                          gpus=[Gpu(0, name="NVIDIA GeForce RTX 5090", uuid="GPU-0", compute_capability="12.0")])
    carried = {"cuda_arch_flags": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]}
    said = arch_problem(build, carried, blackwell)
    assert said and "12.0" in said and "read from the build itself: sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90" in said
    assert arch_problem(build, {**carried, "cuda_arch_flags": [*carried["cuda_arch_flags"], "sm_120"]}, blackwell) is None
    assert arch_problem(build, {}, blackwell) is None  # nothing read: nothing said


@pytest.mark.slow
def test_a_real_venv_with_a_real_cpu_torch_installed_by_pip(env, home, tmp_path):
    """The data scientist's venv: torch installed by pip (this machine's CPU build; numpy not
    asked for, torch doesn't need it), judged with the smoke fit per device and DDP over two
    gloo processes in its own interpreter, then adopted and gated, every file left as it was."""
    venv = tmp_path / "ds"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "torch==2.13.0"], check=True,
                   timeout=1200, env=clean_env())
    if "numpy" in subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list"], capture_output=True,
                                 text=True).stdout:
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", "numpy"], check=True)
    before = checksums(venv)
    r = envcheck(env, "validate", "--python", str(venv), "--devices", "cpu:0,cpu:1", "--json")
    assert r.code == 0, r.err
    (report,) = r.json()["reports"]
    assert report["build"]["version"].startswith("2.13.0") and [d["status"] for d in report["devices"]] == ["pass", "pass"]
    assert report["multi_replica"]["status"] == "pass"
    assert envcheck(env, "env", "adopt", "ds", str(venv)).code == 0
    assert envcheck(env, "validate", "ds", "--devices", "cpu").code == 0
    assert envcheck(env, "check", "--env", "ds", "--json").json()["cached"]
    assert checksums(venv) == before
