"""The env store through the real CLI: real uv and pip installs from a local wheel folder."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Result, clean_env
from wheelhouse import offline

TINY = """title = "tiny"
description = "test preset"
kind = "cpu"
framework = "tensorflow"
requires-python = ">=3.8"
packages = ["alpha==1.0"]
"""


@pytest.fixture
def tiny(home: Path) -> str:
    (home / "presets").mkdir()
    (home / "presets" / "tiny.toml").write_text(TINY)
    return "tiny"


def tree_digest(path: Path) -> str:
    """Every file's path and content under ``path`` (symlinks by target)."""
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        h.update(str(p.relative_to(path)).encode())
        if p.is_symlink():
            h.update(os.readlink(p).encode())
        elif p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def envcheck(home: Path, *args: str) -> Result:
    proc = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True,
                          env=clean_env(ENVCHECK_HOME=str(home)), timeout=600)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="module")
def made(tmp_path_factory, wheelhouse) -> Path:
    """A home with env ``dl`` from the tiny preset, made once for the tests that only read it or
    put back what they change."""
    home = tmp_path_factory.mktemp("env-home")
    (home / "presets").mkdir()
    (home / "presets" / "tiny.toml").write_text(TINY)
    done = envcheck(home, "env", "create", "dl", "--preset", "tiny", *offline(wheelhouse))
    assert done.code == 0, done.err
    return home


def start(home: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "envcheck", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=clean_env(ENVCHECK_HOME=str(home)))


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_create_list_show_export_remove(cli, home, tiny, wheelhouse, installer):
    r = cli("env", "create", "dl", "--preset", tiny, "--add", "beta", "--installer", installer, *offline(wheelhouse))
    assert r.code == 0, r.err
    env = cli("env", "show", "dl", "--json").json()["env"]
    assert env["state"] == "ready"
    assert env["packages"]["alpha"] == "1.0" and env["packages"]["beta"] == "1.0"
    assert env["installer"] == installer
    assert env["preset"] == "tiny" and env["python_version"].startswith("3.")

    listing = cli("env", "list", "--json").json()
    assert listing["schema"] == "envcheck.envs/1"
    (only,) = listing["envs"]
    assert {"name", "path", "state", "preset", "python_version", "created", "packages"} <= set(only)
    assert only["name"] == "dl" and only["state"] == "ready"

    manifest = json.loads((home / "envs" / "dl" / "envcheck.json").read_text())
    assert manifest["preset"]["hash"] and manifest["requested"] == ["alpha==1.0", "beta"]
    assert manifest["packages"]["alpha"] == "1.0" and manifest["installer"] == installer

    # bytecode is compiled at install time
    site = next((home / "envs" / "dl" / "lib").glob("python3*/site-packages"))
    assert list((site / "alpha" / "__pycache__").glob("__init__.*.pyc"))

    exported = cli("env", "export", "dl")
    assert exported.code == 0
    pins = [ln for ln in exported.out.splitlines() if not ln.startswith("#")]
    assert "alpha==1.0" in pins and "beta==1.0" in pins and not any(p.startswith("pip==") for p in pins)
    # the export is a requirements file that reproduces the env
    req = home.parent / "req.txt"
    req.write_text(exported.out)
    r2 = cli("env", "create", "copy", "--preset", tiny, "--add", "-r", *offline(wheelhouse))
    assert r2.code == 2  # '-r' is not a requirement: rejected before anything is made
    assert not (home / "envs" / "copy").exists()

    assert cli("env", "remove", "dl", "--yes").code == 0
    assert not (home / "envs" / "dl").exists()
    assert cli("env", "list", "--json").json()["envs"] == []


def test_add_packages_and_failed_add_changes_nothing(cli, home, tiny, wheelhouse):
    assert cli("env", "create", "dl", "--preset", tiny, *offline(wheelhouse)).code == 0
    r = cli("env", "add", "dl", "alpha==2.0", "beta", *offline(wheelhouse))
    assert r.code == 0, r.err
    env = cli("env", "show", "dl", "--json").json()["env"]
    assert env["packages"]["alpha"] == "2.0" and env["packages"]["beta"] == "1.0"
    assert env["requested"][-2:] == ["alpha==2.0", "beta"]

    before = tree_digest(home / "envs" / "dl")
    bad = cli("env", "add", "dl", "gamma", *offline(wheelhouse))  # gamma needs alpha<1.0: unresolvable
    assert bad.code == 2 and "Traceback" not in bad.err
    assert "gamma" in bad.err and "fix:" in bad.err
    assert tree_digest(home / "envs" / "dl") == before


def test_pip_configuration_reaches_uv(cli, home, tiny, wheelhouse, tmp_path):
    """A site's pip configuration (no CLI index options at all) also applies to uv."""
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nno-index = true\nfind-links = {wheelhouse}\n")
    env = {"PIP_CONFIG_FILE": str(conf), "PIP_FIND_LINKS": "", "PIP_INDEX_URL": "", "PIP_EXTRA_INDEX_URL": ""}
    env = {k: v for k, v in env.items() if v}
    r = cli("env", "create", "dl", "--preset", tiny, "--installer", "uv",
            env={**env, "PIP_FIND_LINKS": str(wheelhouse), "PIP_NO_INDEX": "1"})
    assert r.code == 0, r.err
    manifest = json.loads((home / "envs" / "dl" / "envcheck.json").read_text())
    assert manifest["index"]["no_index"] is True and str(wheelhouse) in manifest["index"]["find_links"]


@pytest.mark.parametrize("args, needle", [
    (["env", "create", "_bad", "--preset", "tiny"], "invalid env name"),
    (["env", "create", "--preset", "tiny", "--", "-bad"], "invalid env name"),
    (["env", "create", "a/b", "--preset", "tiny"], "invalid env name"),
    (["env", "create", "x" * 65, "--preset", "tiny"], "invalid env name"),
    (["env", "create", "ok", "--preset", "no-such-preset"], "no-such-preset"),
    (["env", "create", "ok", "--preset", "tiny", "--add", "alpha>>1"], "alpha>>1"),
    (["env", "create", "ok", "--preset", "tiny", "--python", "/nonexistent/python3"], "/nonexistent/python3"),
    (["env", "create", "ok", "--preset", "tiny", "--add", "alpha>=99"], "alpha>=99"),
    (["env", "create", "ok", "--preset", "tiny", "--index-url", "http://127.0.0.1:9/simple"], "127.0.0.1:9"),
    (["env", "create", "ok", "--preset", "tiny", "--index-url", "--no-deps"], "--no-deps"),
    (["env", "create", "ok", "--preset", "tiny", "--extra-index-url", "http://a b/"], "white space"),
    (["env", "create", "ok", "--preset-file", "/dev/zero"], "limit 'file bytes'"),
    (["env", "add", "missing", "alpha", "--find-links", "-x"], "--find-links"),
    (["env", "create", "ok"], "--preset"),
    (["env", "show", "missing"], "missing"),
    (["env", "add", "missing", "alpha"], "missing"),
    (["env", "remove", "missing", "--yes"], "missing"),
])
def test_bad_input_exits_2_and_changes_nothing(cli, home, tiny, wheelhouse, args, needle):
    before = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    extra = [] if "--index-url" in args else ["--no-index", "--find-links", str(wheelhouse)]
    extra = extra if args[1] in ("create", "add") and len(args) > 2 else []
    r = cli(*args[:2], *extra, *args[2:])
    assert r.code == 2, (r.out, r.err)
    errors = [ln for ln in r.err.splitlines() if ln.startswith("envcheck: error:")]
    assert len(errors) == 1 and needle in errors[0] and "fix:" in errors[0], r.err
    assert "Traceback" not in r.err
    # nothing at all: no log, no lock, no uv cache, no empty envs/ or tmp/
    after = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    assert after == before


def test_verbose_shows_traceback(cli, tiny):
    r = cli("-v", "env", "show", "missing")
    assert r.code == 2 and "Traceback" in r.err


def test_existing_env_is_not_replaced(made, wheelhouse):
    home = made
    before = tree_digest(home / "envs" / "dl")
    r = envcheck(home, "env", "create", "dl", "--preset", "tiny", *offline(wheelhouse))
    assert r.code == 2 and "already exists" in r.err
    assert tree_digest(home / "envs" / "dl") == before


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_create_leaves_nothing(home, tiny, slow_links, sig):
    url, requested, _ = slow_links
    proc = start(home, "env", "create", "dl", "--preset", tiny, "--no-index", "--find-links", url)
    assert requested.wait(60), "the installer never reached the index"
    assert (home / "envs" / "dl" / "envcheck.json").exists()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert not (home / "envs" / "dl").exists()


def test_sigkilled_create_is_incomplete_then_recovered(cli, home, tiny, wheelhouse, slow_links):
    url, requested, _ = slow_links
    proc = start(home, "env", "create", "dl", "--preset", tiny, "--no-index", "--find-links", url)
    assert requested.wait(60)
    installers = subprocess.run(["pgrep", "-f", "--", f"--find-links {url}"], capture_output=True, text=True).stdout.split()
    assert installers, "the installer should be running"
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in installers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{pid}").exists() for pid in installers), "the installer outlived envcheck"
    (env,) = cli("env", "list", "--json").json()["envs"]
    assert env["name"] == "dl" and env["state"] == "incomplete"
    r = cli("env", "create", "dl", "--preset", tiny, *offline(wheelhouse))
    assert r.code == 0, r.err
    assert cli("env", "show", "dl", "--json").json()["env"]["state"] == "ready"


def test_concurrent_create_one_wins(cli, home, tiny, slow_links):
    url, requested, _ = slow_links
    first = start(home, "env", "create", "dl", "--preset", tiny, "--no-index", "--find-links", url)
    assert requested.wait(60)
    second = cli("env", "create", "dl", "--preset", tiny, "--no-index", "--find-links", url)
    assert second.code == 1
    assert "env dl is being changed by another envcheck process" in second.err
    first.terminate()
    first.communicate(timeout=60)


def test_interrupted_add_restores_env(cli, home, tiny, wheelhouse, slow_links):
    assert cli("env", "create", "dl", "--preset", tiny, *offline(wheelhouse)).code == 0
    before = tree_digest(home / "envs" / "dl")
    url, requested, _ = slow_links
    proc = start(home, "env", "add", "dl", "beta", "--no-index", "--find-links", url)
    assert requested.wait(60)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert tree_digest(home / "envs" / "dl") == before


def test_list_reads_metadata_without_starting_interpreters(made, tmp_path):
    home = made
    marker = tmp_path / "started"
    python = home / "envs" / "dl" / "bin" / "python"
    target = os.readlink(python)
    python.unlink()
    try:
        python.write_text(f"#!/bin/sh\ntouch {marker}\n")
        python.chmod(0o755)
        (env,) = envcheck(home, "env", "list", "--json").json()["envs"]
    finally:  # the shared env's interpreter back
        python.unlink()
        python.symlink_to(target)
    assert env["packages"]["alpha"] == "1.0" and env["state"] == "ready"
    assert not marker.exists()


def test_corrupt_manifest_lists_as_broken(made):
    manifest = made / "envs" / "dl" / "envcheck.json"
    kept = manifest.read_bytes()
    manifest.write_text("{not json")
    try:
        r = envcheck(made, "env", "list", "--json")
    finally:  # the shared env's manifest back
        manifest.write_bytes(kept)
    assert r.code == 0
    (env,) = r.json()["envs"]
    assert env["state"] == "broken" and "manifest" in env["problem"]


def test_remove_never_leaves_the_home(cli, home, tmp_path):
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "envcheck.json").write_text("{}")
    (outside / "data").write_text("keep me")
    (home / "envs").mkdir()
    (home / "envs" / "link").symlink_to(outside)
    r = cli("env", "remove", "link", "--yes")
    assert r.code == 2 and "symbolic link" in r.err
    assert (outside / "data").read_text() == "keep me"

    (home / "envs" / "mine").mkdir()
    (home / "envs" / "mine" / "data").write_text("not envcheck's")
    r = cli("env", "remove", "mine", "--yes")
    assert r.code == 2 and "manifest" in r.err
    assert (home / "envs" / "mine" / "data").exists()


def test_remove_needs_confirmation_when_not_interactive(made):
    r = envcheck(made, "env", "remove", "dl")
    assert r.code == 2 and "--yes" in r.err
    assert (made / "envs" / "dl").exists()


def test_create_finds_a_python_the_preset_allows(cli, home, wheelhouse):
    """requires-python excluding the running interpreter: envcheck finds one that fits."""
    from envcheck.envs.pythons import list_pythons

    if not any(str(p.version).startswith("3.10.") for p in list_pythons()):
        pytest.skip("no Python 3.10 on this machine")
    (home / "presets").mkdir()
    (home / "presets" / "old.toml").write_text(TINY.replace('">=3.8"', '">=3.8,<3.11"'))
    r = cli("env", "create", "old", "--preset", "old", *offline(wheelhouse))
    assert r.code == 0, r.err
    env = cli("env", "show", "old", "--json").json()["env"]
    assert env["python_version"].startswith("3.10.") and env["packages"]["alpha"] == "1.0"
    version = subprocess.run([str(home / "envs" / "old" / "bin" / "python"), "-c",
                              "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    assert version.stdout.strip() == "(3, 10)"


GPU_STANDIN = """title = "tensorflow (CUDA 12) stand-in"
kind = "gpu"
framework = "tensorflow"
requires-python = ">=3.8"
packages = ["tensorflow==2.21.0"]

[gpu]
cuda = "12.5"
"""


@pytest.fixture
def gpu_preset(home: Path) -> str:
    (home / "presets").mkdir()
    (home / "presets" / "tfgpu.toml").write_text(GPU_STANDIN)
    return "tfgpu"


def test_a_gpu_preset_this_host_cant_train_with_is_refused_before_any_download(
        home, gpu_preset, wheelhouse, fake_nvml, tmp_path):
    """No NVIDIA library here, or a driver too old for the build: exit 2 before anything is
    fetched or written, the reason, and one alternative per sentence of the fix."""
    before = sorted(p.name for p in home.iterdir())
    hosts = {"no GPU": fake_nvml.env(lib_dir=tmp_path, ENVCHECK_HOME=str(home)),  # no libnvidia-ml there
             "old driver": fake_nvml.env(FAKE_NVML_DRIVER="470.82.01", FAKE_NVML_CUDA="11040",
                                         ENVCHECK_HOME=str(home))}
    for host, env in hosts.items():
        r = fake_nvml.cli(env, "env", "create", "dl", "--preset", gpu_preset, *offline(wheelhouse))
        assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err, (host, r.err)
        assert r.err.startswith("envcheck: error: this host can't train with GPU preset tfgpu: ")
        assert "creating env" not in r.err  # said before the install began
        fix = r.err.split("; fix: ", 1)[1].strip()
        assert fix.endswith("To build it for another host, pass --for-another-host.")
        assert "To train on this host's CPU, create a CPU env: envcheck env create tensorflow-cpu" in fix
        assert sorted(p.name for p in home.iterdir()) == before, host
    no_gpu = fake_nvml.cli(hosts["no GPU"], "env", "create", "dl", "--preset", gpu_preset, *offline(wheelhouse))
    assert "no usable GPU: the NVIDIA management library libnvidia-ml.so.1 was not found" in no_gpu.err
    assert "fix: install the NVIDIA driver. In a container, start it with `--gpus all`" in no_gpu.err
    old = fake_nvml.cli(hosts["old driver"], "env", "create", "dl", "--preset", gpu_preset, *offline(wheelhouse))
    assert "needs driver >= 525.60.13; fix: upgrade the NVIDIA driver to >= 525.60.13. " in old.err


def test_for_another_host_makes_it_and_a_host_that_fits_needs_no_flag(home, gpu_preset, wheelhouse, fake_nvml,
                                                                      tmp_path):
    no_gpu = fake_nvml.env(lib_dir=tmp_path, ENVCHECK_HOME=str(home))
    r = fake_nvml.cli(no_gpu, "env", "create", "dl", "--preset", gpu_preset, "--for-another-host",
                      *offline(wheelhouse), "--json")
    assert r.code == 0, r.err
    assert r.json()["env"]["state"] == "ready" and r.json()["env"]["packages"]["tensorflow"] == "2.21.0"
    a100 = fake_nvml.env(FAKE_NVML_DRIVER="550.54.15", FAKE_NVML_CUDA="12040", ENVCHECK_HOME=str(home))
    fits = fake_nvml.cli(a100, "env", "create", "dl2", "--preset", gpu_preset, *offline(wheelhouse))
    assert fits.code == 0, fits.err


def test_an_installer_backend_missing_a_method_fails_when_made_not_mid_install():
    from envcheck.envs.installers import Installer, PipInstaller, UvInstaller

    class Half(Installer):
        def create_venv(self, python, target, log):
            pass

    with pytest.raises(TypeError, match="install_command"):
        Half()
    with pytest.raises(TypeError):
        Installer()
    assert (UvInstaller().name, PipInstaller().name) == ("uv", "pip")


def test_pip_configuration_is_read_only_where_it_can_change_where_packages_come_from(monkeypatch):
    """--no-index with --find-links decides everything: pip's configuration (`pip config list`
    starts pip, a second on every install) isn't read; any other command line is laid over it."""
    from envcheck.envs import indexes

    config = ["global.find-links='/opt/wheels'", "global.index-url='https://mirror.example/simple'"]
    reads = []
    monkeypatch.setattr(indexes, "_pip_config_lines", lambda: reads.append(1) or config)
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)
    offline_only = indexes.IndexSettings.from_options(None, (), ["/w"], True)
    assert indexes.configured(offline_only) == offline_only and reads == []
    no_index = indexes.configured(indexes.IndexSettings.from_options(None, (), (), True))
    assert reads == [1] and no_index.no_index and no_index.find_links == ("/opt/wheels",)
    links = indexes.configured(indexes.IndexSettings.from_options(None, (), ["/w"], False))
    assert links.find_links == ("/w",) and links.index_url == "https://mirror.example/simple"
    assert indexes.configured(None).index_url == "https://mirror.example/simple" and len(reads) == 3
    monkeypatch.setenv("PIP_INDEX_URL", "https://carried.example/simple")  # variables cost nothing: read
    assert indexes.configured(offline_only).index_url == "https://carried.example/simple" and len(reads) == 3
    served = indexes.IndexSettings.from_options(None, (), ["https://wheels.example/"], True)
    indexes.configured(served)  # a server's links: its trusted hosts and certificates may apply
    assert len(reads) == 4


def test_the_log_a_progress_line_points_at_is_kept_and_old_ones_pruned(cli, home, tiny, wheelhouse):
    logs = home / "logs"
    logs.mkdir()
    for day in range(1, 13):  # twelve older logs of this env, and one of another
        (logs / f"dl-create-202601{day:02d}T000000-1.log").write_text("old\n")
        os.utime(logs / f"dl-create-202601{day:02d}T000000-1.log", (day * 86400, day * 86400))
    (logs / "other-add-20260101T000000-1.log").write_text("old\n")
    r = cli("env", "create", "dl", "--preset", "tiny", *offline(wheelhouse))
    assert r.code == 0, r.err
    shown = r.err.split("(log: ")[1].split(")")[0]
    assert Path(shown).is_file() and "alpha==1.0" in Path(shown).read_text()  # the installer's output, kept
    kept = sorted(p.name for p in logs.iterdir() if p.name.startswith("dl-"))
    assert len(kept) == 10 and Path(shown).name in kept and "dl-create-20260112T000000-1.log" in kept
    assert "dl-create-20260101T000000-1.log" not in kept and (logs / "other-add-20260101T000000-1.log").exists()


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_an_installers_failure_shows_the_lines_that_say_why(cli, home, wheelhouse, installer):
    (home / "presets").mkdir()
    (home / "presets" / "gap.toml").write_text(TINY.replace('"alpha==1.0"', '"alpha>1.0,<2.0"'))
    r = cli("env", "create", "gap", "--preset", "gap", "--installer", installer, *offline(wheelhouse))
    assert r.code == 2 and r.err.count("envcheck: error") == 1
    said = r.err.split("envcheck: error: ")[1]
    assert ("alpha<=1.0" in said and "alpha>=2.0" in said) if installer == "uv" else "(from versions: 1.0, 2.0)" in said


def test_pip_in_an_activated_env_says_what_installs_there(cli, home, tiny, wheelhouse):
    """uv makes envs without pip: after `source bin/activate`, `pip` is envcheck's word on how to
    add a package, not the system's pip; `env add ENV pip` gives the env a pip of its own."""
    assert cli("env", "create", "dl", "--preset", "tiny", "--installer", "uv", *offline(wheelhouse)).code == 0
    env_dir = home / "envs" / "dl"
    for name in ("pip", "pip3", f"pip{sys.version_info.major}.{sys.version_info.minor}"):
        assert (env_dir / "bin" / name).is_file()
    activated = subprocess.run(["bash", "-c", f". {env_dir}/bin/activate && pip install beta"],
                               capture_output=True, text=True, env=clean_env(), timeout=60)
    assert activated.returncode == 1 and "envcheck env add dl PACKAGE" in activated.stderr
    assert cli("env", "verify", "dl").code == 0  # the shim is part of the env as made
    assert cli("env", "add", "dl", "pip", "--find-links", str(Path(__import__("virtualenv").__file__).parent
                                                             / "seed" / "wheels" / "embed"), "--no-index").code == 0
    own = subprocess.run(["bash", "-c", f". {env_dir}/bin/activate && pip --version"], capture_output=True,
                         text=True, env=clean_env(), timeout=60)
    assert own.returncode == 0 and str(env_dir) in own.stdout


def test_a_package_a_pip_install_added_is_recorded_or_taken_out_not_the_env_remade(cli, home, tiny, wheelhouse):
    assert cli("env", "create", "dl", "--preset", "tiny", "--installer", "pip", *offline(wheelhouse)).code == 0
    python = home / "envs" / "dl" / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse),
                    "gamma", "--no-deps"], check=True, env=clean_env(), timeout=120)
    r = cli("env", "verify", "dl", "--json")
    assert r.code == 1 and r.json()["packages"]["added"] == {"gamma": "1.0"}
    fix = r.json()["fix"]
    assert fix.startswith("record them: envcheck env add dl gamma==1.0; or take them out again: ")
    assert "pip uninstall -y gamma" in fix and "env remove" not in fix


def test_the_env_lock_excludes_a_second_holder_and_is_gone_with_its_process(tmp_path):
    from envcheck.envs.envlock import EnvLock, Timeout

    path = tmp_path / "e.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from envcheck.envs.envlock import EnvLock; "
                               f"EnvLock({str(path)!r}).acquire(); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(Timeout):
            EnvLock(path).acquire(timeout=0.3, poll_interval=0.05)
    finally:
        holder.kill()
        holder.wait()
    lock = EnvLock(path)
    lock.acquire(timeout=2)  # a killed holder holds nothing
    path.unlink()  # removed while held: the next one takes the file that is there now
    other = EnvLock(path)
    other.acquire()
    assert other.is_locked and path.exists()
    lock.release()
    other.release()
