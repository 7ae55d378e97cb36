"""Jupyter kernels of envs for real: envs made by `envcheck env create`, ipykernel installed into
them from the configured package index, the kernel started with jupyter_client, code executed
in it, and the kernel shut down. Every Jupyter folder is redirected into the test's tmp dir."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Result, clean_env
from wheelhouse import build_wheel, offline

STANDIN = """title = "tensorflow-cpu stand-in with a CUDA library wheel"
kind = "cpu"
framework = "tensorflow"
packages = ["tensorflow-cpu==2.21.0", "nvidia-fakelib-cu12==12.0"]
"""
TINY = """title = "tiny"
kind = "cpu"
framework = "tensorflow"
packages = ["alpha==1.0"]
"""
REPORT = ("import json, os, sys; print(json.dumps({'executable': sys.executable, 'prefix': sys.prefix, "
          "'pid': os.getpid(), 'path': sys.path, 'env': dict(os.environ)}))")


@pytest.fixture(scope="module")
def wheels(wheelhouse: Path, tmp_path_factory) -> Path:
    """The suite's wheels plus a CUDA-library wheel laid out as NVIDIA's are (nvidia/X/lib)."""
    folder = tmp_path_factory.mktemp("kernel-wheels")
    for wheel in wheelhouse.glob("*.whl"):
        shutil.copy(wheel, folder)
    build_wheel(folder, "nvidia-fakelib-cu12", "12.0",
                files={"nvidia/fakelib/lib/libfake.so.12": "", "nvidia/fakelib/__init__.py": ""})
    return folder


@pytest.fixture(scope="module")
def jupyter(tmp_path_factory) -> dict[str, str]:
    """Jupyter's folders, all inside the test's tmp dir."""
    root = tmp_path_factory.mktemp("jupyter")
    return {"JUPYTER_DATA_DIR": str(root / "data"), "JUPYTER_CONFIG_DIR": str(root / "config"),
            "JUPYTER_RUNTIME_DIR": str(root / "runtime"), "JUPYTER_PATH": "", "IPYTHONDIR": str(root / "ipython")}


@pytest.fixture(scope="module")
def home(tmp_path_factory, wheels: Path, jupyter) -> Path:
    """An env home with env `dl` (a TensorFlow stand-in and a CUDA-library wheel, no ipykernel)."""
    root = tmp_path_factory.mktemp("kernel-home")
    (root / "presets").mkdir()
    (root / "presets" / "standin.toml").write_text(STANDIN)
    (root / "presets" / "tiny.toml").write_text(TINY)
    made = envcheck(root, jupyter, "env", "create", "dl", "--preset", "standin", *offline(wheels))
    assert made.code == 0, made.err
    return root


def envcheck(home: Path, jupyter: dict[str, str], *args: str, **extra: str) -> Result:
    proc = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True,
                          env=clean_env(ENVCHECK_HOME=str(home), **jupyter, **extra), timeout=600)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cli(home: Path, jupyter):
    return lambda *args, **extra: envcheck(home, jupyter, *args, **extra)


def user_kernels(jupyter) -> Path:
    return Path(jupyter["JUPYTER_DATA_DIR"]) / "kernels"


def packages(cli, name: str) -> dict[str, str]:
    return cli("env", "show", name, "--json").json()["env"]["packages"]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def mentioning(text: str) -> list[int]:
    """Processes whose command line holds ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if text.encode() in fh.read() and alive(int(entry)):
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def run_in_kernel(jupyter: dict[str, str], kernel: str, code: str, **server_env: str) -> tuple[dict, str]:
    """Start ``kernel`` as a Jupyter server would (its environment: ours plus ``server_env``),
    run ``code``, shut the kernel down; (what the code printed, parsed as JSON; the connection file)."""
    from jupyter_client import KernelManager

    saved = dict(os.environ)
    os.environ.update({**jupyter, **server_env})
    km = KernelManager(kernel_name=kernel)
    try:
        km.start_kernel()
        client = km.client()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=120)
            out: list[str] = []

            def hook(message):
                if message["msg_type"] == "stream":
                    out.append(message["content"]["text"])
                elif message["msg_type"] == "error":
                    out.append("\n".join(message["content"]["traceback"]))

            reply = client.execute_interactive(code, output_hook=hook, timeout=120)
            assert reply["content"]["status"] == "ok", "".join(out)
        finally:
            client.stop_channels()
        km.shutdown_kernel(now=False)
        return json.loads("".join(out)), km.connection_file
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
        os.environ.clear()
        os.environ.update(saved)


def test_kernel_runs_in_the_env_with_what_run_sets(cli, home, jupyter, tmp_path):
    env_dir = home / "envs" / "dl"
    assert "ipykernel" not in packages(cli, "dl")

    # a kernelspec envcheck did not write is never replaced, and the refusal changes nothing
    foreign = tmp_path / "jp" / "share" / "jupyter" / "kernels" / "envcheck-dl"
    foreign.mkdir(parents=True)
    (foreign / "kernel.json").write_text('{"argv": ["python"], "display_name": "mine", "language": "python"}')
    refused = cli("kernel", "install", "dl", "--prefix", str(tmp_path / "jp"))
    assert refused.code == 2, refused.err
    assert "not a kernelspec envcheck wrote" in refused.err and "fix:" in refused.err
    assert len(refused.err.strip().splitlines()) == 1
    assert json.loads((foreign / "kernel.json").read_text())["display_name"] == "mine"
    assert "ipykernel" not in packages(cli, "dl")
    # a prefix whose share/ is a file, not a folder: refused before ipykernel is added
    (tmp_path / "pfx").mkdir()
    (tmp_path / "pfx" / "share").write_text("")
    refused = cli("kernel", "install", "dl", "--prefix", str(tmp_path / "pfx"))
    assert refused.code == 2 and "is not a folder" in refused.err and len(refused.err.strip().splitlines()) == 1
    assert "ipykernel" not in packages(cli, "dl")

    installed = cli("kernel", "install", "dl", "--json")
    assert installed.code == 0, installed.err
    doc = installed.json()
    assert doc["schema"] == "envcheck.kernel/1"
    assert "ipykernel" in doc["added"]  # it said so
    kernel = doc["kernel"]
    assert kernel["name"] == "envcheck-dl" and kernel["status"] == "ok"
    assert Path(kernel["path"]) == user_kernels(jupyter) / "envcheck-dl"
    major_minor = ".".join(cli("env", "show", "dl", "--json").json()["env"]["python_version"].split(".")[:2])
    assert kernel["display_name"] == f"Python {major_minor} (envcheck: dl)"
    shown = cli("env", "show", "dl", "--json").json()["env"]
    assert "ipykernel" in shown["packages"] and "ipykernel" in shown["requested"]  # through the store

    library = next(env_dir.glob("lib/python3*/site-packages/nvidia/fakelib/lib"))
    server_path = tmp_path / "server-site"
    server_path.mkdir()
    seen, connection_file = run_in_kernel(jupyter, "envcheck-dl", REPORT, PYTHONPATH=str(server_path),
                                          LD_LIBRARY_PATH="/opt/server-lib", CUDA_DEVICE_ORDER="FASTEST_FIRST")
    assert Path(seen["prefix"]) == env_dir
    assert Path(seen["executable"]) == env_dir / "bin" / "python"
    environ = seen["env"]
    assert environ["VIRTUAL_ENV"] == str(env_dir)
    assert environ["PATH"].split(os.pathsep)[0] == str(env_dir / "bin")
    assert environ["PATH"].split(os.pathsep)[1:] == os.environ["PATH"].split(os.pathsep)
    assert environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert environ["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert environ["LD_LIBRARY_PATH"].split(os.pathsep) == [str(library), "/opt/server-lib"]
    assert str(server_path) not in seen["path"]  # the server's PYTHONPATH doesn't reach the env

    deadline = time.monotonic() + 10
    while (alive(seen["pid"]) or mentioning(Path(connection_file).name)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(seen["pid"]) and not mentioning(Path(connection_file).name)

    listed = cli("kernel", "list", "--json")
    assert listed.code == 0, listed.err
    assert listed.json()["schema"] == "envcheck.kernels/1"
    (mine,) = [k for k in listed.json()["kernels"] if k["env"] == "dl"]
    assert mine["status"] == "ok" and mine["python"] == str(env_dir / "bin" / "python")

    # a kernelspec that no longer starts the kernel as `run` would is flagged; installing
    # again replaces envcheck's own kernelspec, and adds nothing
    spec_file = user_kernels(jupyter) / "envcheck-dl" / "kernel.json"
    spec = json.loads(spec_file.read_text())
    del spec["env"]["CUDA_DEVICE_ORDER"]
    spec_file.write_text(json.dumps(spec))
    (stale,) = [k for k in cli("kernel", "list", "dl", "--json").json()["kernels"]]
    assert stale["status"] == "outdated" and stale["fix"] == "envcheck kernel install dl"
    again = cli("kernel", "install", "dl", "--json")
    assert again.code == 0, again.err
    assert again.json()["added"] == {} and again.json()["kernel"]["status"] == "ok"
    assert json.loads(spec_file.read_text())["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_create_with_kernel_prefix_and_env_remove(cli, home, jupyter, wheels, tmp_path):
    foreign = user_kernels(jupyter) / "someone-elses"
    foreign.mkdir(parents=True)
    (foreign / "kernel.json").write_text('{"argv": ["python"], "display_name": "theirs", "language": "python"}')

    # ipykernel comes from the configured index (pip's configuration), alpha from the test's wheels
    made = cli("env", "create", "nb", "--preset", "tiny", "--find-links", str(wheels), "--kernel")
    assert made.code == 0, made.err
    assert "added ipykernel" in made.out and "envcheck-nb" in made.out
    spec = json.loads((user_kernels(jupyter) / "envcheck-nb" / "kernel.json").read_text())
    assert spec["argv"][1:] == ["-m", "ipykernel_launcher", "-f", "{connection_file}"]
    assert spec["metadata"]["envcheck"]["env"] == "nb"
    assert "TF_FORCE_GPU_ALLOW_GROWTH" not in spec["env"]  # no framework installed in nb
    assert "LD_LIBRARY_PATH" not in spec["env"]  # and no CUDA wheel

    prefix = tmp_path / "prefix"
    at_prefix = cli("kernel", "install", "nb", "--prefix", str(prefix))
    assert at_prefix.code == 0, at_prefix.err
    prefixed = prefix / "share" / "jupyter" / "kernels" / "envcheck-nb"
    assert (prefixed / "kernel.json").is_file()
    assert "Jupyter does not search" in at_prefix.out  # and how to make it
    listed = cli("kernel", "list", "nb", "--json").json()["kernels"]
    assert sorted(k["path"] for k in listed) == sorted([str(prefixed), str(user_kernels(jupyter) / "envcheck-nb")])

    removed = cli("env", "remove", "nb", "--yes")
    assert removed.code == 0, removed.err
    assert not (user_kernels(jupyter) / "envcheck-nb").exists() and not prefixed.exists()
    assert "envcheck-nb" in removed.out
    assert (foreign / "kernel.json").is_file()  # not envcheck's: left alone
    assert not (home / "envs" / "nb").exists()


def test_list_flags_broken_and_gone_envs_and_remove(cli, home, jupyter, wheels):
    made = cli("env", "create", "gone", "--preset", "tiny", "--find-links", str(wheels), "--kernel")
    assert made.code == 0, made.err
    env_dir = home / "envs" / "gone"

    (env_dir / "bin" / "python").unlink()
    (broken,) = [k for k in cli("kernel", "list", "--json").json()["kernels"] if k["env"] == "gone"]
    assert broken["status"] == "broken" and broken["fix"]

    shutil.rmtree(env_dir)
    listed = cli("kernel", "list")
    assert listed.code == 0, listed.err
    (gone,) = [k for k in cli("kernel", "list", "--json").json()["kernels"] if k["env"] == "gone"]
    assert gone["status"] == "gone" and gone["fix"] == "envcheck kernel remove gone"
    assert "env gone is gone; fix: envcheck kernel remove gone" in listed.out

    removed = cli("kernel", "remove", "gone", "--json")
    assert removed.code == 0, removed.err
    assert removed.json()["schema"] == "envcheck.kernel-removal/1"
    assert not (user_kernels(jupyter) / "envcheck-gone").exists()
    again = cli("kernel", "remove", "gone")
    assert again.code == 2 and "no Jupyter kernel of env gone" in again.err


def test_a_prefixed_kernel_of_a_gone_env_is_listed_with_the_fix_that_finds_it(cli, home, wheels, tmp_path):
    made = cli("env", "create", "away", "--preset", "tiny", "--find-links", str(wheels))
    assert made.code == 0, made.err
    prefix = tmp_path / "my prefix"  # a space: the fix quotes it
    installed = cli("kernel", "install", "away", "--prefix", str(prefix))
    assert installed.code == 0, installed.err
    spec_dir = prefix / "share" / "jupyter" / "kernels" / "envcheck-away"
    shutil.rmtree(home / "envs" / "away")  # the env is gone; its record of the prefix with it

    listed = cli("kernel", "list", "--prefix", str(prefix), "--json").json()["kernels"]
    (gone,) = [k for k in listed if k["env"] == "away"]
    assert gone["status"] == "gone" and gone["path"] == str(spec_dir)
    assert gone["fix"] == f"envcheck kernel remove away --prefix '{prefix}'"
    assert f"fix: envcheck kernel remove away --prefix '{prefix}'" in cli("kernel", "list", "--prefix", str(prefix)).out
    fixed = cli(*shlex.split(gone["fix"])[1:])  # the fix, as given, does it
    assert fixed.code == 0, fixed.err
    assert not spec_dir.exists()


@pytest.mark.parametrize(("args", "message"), [
    (("kernel", "install", "bad/name"), "invalid env name"),
    (("kernel", "install", "nosuch"), "no env named 'nosuch'"),
    (("kernel", "list", "-x"), "No such option"),
    (("kernel", "remove", "bad name"), "invalid env name"),
    (("kernel", "install", "dl", "--prefix", "/tmp/p", "--sys-prefix"), "give one of --prefix and --sys-prefix"),
])
def test_bad_input_is_one_line_exit_2(cli, jupyter, args, message):
    before = sorted(p.name for p in user_kernels(jupyter).glob("*")) if user_kernels(jupyter).exists() else []
    result = cli(*args)
    assert result.code == 2, result.err
    assert message in result.err and "fix:" in result.err
    assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err
    after = sorted(p.name for p in user_kernels(jupyter).glob("*")) if user_kernels(jupyter).exists() else []
    assert after == before
