"""Locks that follow PEP 751 (issue 26): any lock pip or uv wrote installs as `packaging.pylock`
selects it; a lock's target is its ``requires-python`` and ``environments``, said in its own
words when this interpreter is not one; ``[tool.envcheck]`` changes nothing installed; a wheel's
URL is tried, then an index by name and hash; nothing from a lock reaches an installer
unchecked; a GPU preset is locked with the newest build that fits the target; a second env is
linked only from one made from the same sources."""
from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from test_locks import env, lock, manifest, offline  # noqa: F401 (env: a fixture)
from test_select import envcheck
from wheelhouse import build_wheel

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _python(minor: str) -> Path | None:
    return next(iter(sorted(Path(os.path.expanduser("~/.pyenv/versions")).glob(f"{minor}.*/bin/python{minor}"))), None)


def _uv() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))})
    assert done.returncode == 0, done.stderr
    return done.stdout


def _packages(home: Path, name: str) -> dict[str, str]:
    return {n: v for n, v in manifest(home, name)["packages"].items() if n != "pip"}


def _selected(path: Path, python: Path | None = None) -> dict[str, str]:
    """What packaging.pylock selects of the lock at ``path`` for ``python`` (this one by default)."""
    script = ("import json, sys, tomllib; from packaging.pylock import Pylock; "
              "lock = Pylock.from_dict(tomllib.load(open(sys.argv[1], 'rb'))); "
              "print(json.dumps({str(p.name): str(p.version) for p, _ in lock.select()}))")
    if python is None:
        return json.loads(_run([sys.executable, "-c", script, str(path)]))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(__import__("packaging").__file__)))
    done = subprocess.run([str(python), "-c", script, str(path)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_locks_written_by_pip_and_uv_install_as_the_standard_selects_them(env, home, tmp_path, wheelhouse):
    (tmp_path / "req.in").write_text("beta\n")
    locks = {"uv-compile": tmp_path / "uv" / "pylock.toml", "pip-lock": tmp_path / "pip" / "pylock.toml"}
    for path in locks.values():
        path.parent.mkdir()
    _run([_uv(), "pip", "compile", str(tmp_path / "req.in"), "--format", "pylock.toml", "--no-index", "--find-links",
          str(wheelhouse), "--quiet", "-o", str(locks["uv-compile"])])
    _run([sys.executable, "-m", "virtualenv", "--quiet", "--no-setuptools", "--no-wheel", str(tmp_path / "pipvenv")])
    _run([str(tmp_path / "pipvenv" / "bin" / "pip"), "lock", "--quiet", "--no-index", "--find-links", str(wheelhouse),
          "beta", "-o", str(locks["pip-lock"])])
    assert 'created-by = "pip"' in locks["pip-lock"].read_text()
    assert 'created-by = "uv"' in locks["uv-compile"].read_text()
    for label, path in locks.items():
        wanted = _selected(path)
        assert wanted == {"alpha": "2.0", "beta": "1.0"}
        for installer in ("uv", "pip"):
            name = f"{label}-{installer}"
            r = envcheck(env, "env", "create", name, "--lock", str(path), "--installer", installer, "--no-link")
            assert r.code == 0, r.err
            assert _packages(home, name) == wanted
            shown = json.loads(envcheck(env, "env", "show", name, "--json").out)["env"]
            assert shown["lock"]["created_by"] in ("pip", "uv") and shown["preset"] is None
            assert envcheck(env, "env", "verify", name).code == 0


def test_a_package_listed_twice_is_chosen_by_its_marker_and_a_directory_is_refused(env, home, tmp_path, wheelhouse):
    project = tmp_path / "proj"
    _run([_uv(), "init", "--quiet", "--no-workspace", "--name", "proj", "--python", sys.executable, str(project)])
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(re.sub(r'requires-python = ".*"', 'requires-python = ">=3.10"', text))
    _run([_uv(), "add", "--quiet", "--no-index", "--find-links", str(wheelhouse), "--python", sys.executable,
          "alpha==1.0; python_version < '3.12'", "alpha==2.0; python_version >= '3.12'", "beta"], cwd=project)
    exported = _run([_uv(), "export", "--quiet", "--format", "pylock.toml", "--no-index", "--find-links",
                     str(wheelhouse), "--no-emit-project"], cwd=project)
    path = tmp_path / "pylock.toml"
    path.write_text(exported)
    assert exported.count('name = "alpha"') == 2  # uv export writes one entry per marker

    r = envcheck(env, "env", "create", "here", "--lock", str(path))
    assert r.code == 0, r.err
    expected = "1.0" if sys.version_info < (3, 12) else "2.0"
    assert _packages(home, "here")["alpha"] == expected == _selected(path)["alpha"]
    assert envcheck(env, "env", "verify", "here").code == 0
    other = _python("3.12") if sys.version_info < (3, 12) else _python("3.11")
    if other is not None:
        r = envcheck(env, "env", "create", "there", "--lock", str(path), "--python", str(other))
        assert r.code == 0, r.err
        assert _packages(home, "there")["alpha"] == ("2.0" if expected == "1.0" else "1.0")
        assert envcheck(env, "env", "verify", "there").code == 0

    with_project = tmp_path / "with" / "pylock.toml"
    with_project.parent.mkdir()
    with_project.write_text(_run([_uv(), "export", "--quiet", "--format", "pylock.toml", "--no-index",
                                  "--find-links", str(wheelhouse)], cwd=project))
    r = envcheck(env, "env", "create", "proj", "--lock", str(with_project))
    assert r.code == 2 and "(proj) is a local directory" in r.err and "--no-emit-project" in r.err, r.err
    assert not (home / "envs" / "proj").exists()


def _wheel_lock(wheelhouse: Path, names=("alpha-2.0", "beta-1.0"), url=None, extra: str = "", package: str = "",
                top: str = "") -> str:
    """A lock of the wheelhouse's wheels, written by hand (each entry as pip writes it)."""
    out = [f'lock-version = "1.0"\ncreated-by = "tests"\n{top}']
    for stem in names:
        name, version = stem.split("-")
        file = wheelhouse / f"{name}-{version}-py3-none-any.whl"
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        where = (url or file.as_uri().rpartition("/")[0]) + "/" + file.name
        out.append(f'[[packages]]\nname = "{name}"\nversion = "{version}"\n{package}'
                   f'wheels = [{{ url = "{where}", hashes = {{ sha256 = "{digest}" }} }}]\n')
    return "\n".join(out) + extra


def test_a_lock_for_another_platform_or_python_is_refused_in_its_own_words(env, home, tmp_path, wheelhouse):
    path = tmp_path / "pylock.toml"
    path.write_text(_wheel_lock(wheelhouse, top="environments = [\"sys_platform == 'win32'\"]\n"))
    r = envcheck(env, "env", "create", "w", "--lock", str(path), "--for-another-host")
    assert r.code == 2 and 'sys_platform == "win32"' in r.err and "its environments" in r.err, r.err
    path.write_text(_wheel_lock(wheelhouse, top='requires-python = ">=3.99"\n'))
    r = envcheck(env, "env", "create", "w", "--lock", str(path))
    assert r.code == 2 and "requires-python >=3.99" in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not (home / "envs").exists()


def test_the_tool_table_changes_nothing_installed(env, home, tmp_path, wheelhouse):
    path = lock(env, tmp_path, wheelhouse, "--preset", "tf")
    text = path.read_text()
    assert 'created-by = "envcheck"' in text and "[tool.envcheck]" in text
    bare = tmp_path / "bare" / "pylock.toml"
    bare.parent.mkdir()
    bare.write_text(text.split("[tool.envcheck]")[0])
    for name, source in (("with", path), ("without", bare)):
        r = envcheck(env, "env", "create", name, "--lock", str(source), "--no-link", *offline(wheelhouse))
        assert r.code == 0, r.err
    assert _packages(home, "with") == _packages(home, "without")
    assert manifest(home, "with")["digest"] == manifest(home, "without")["digest"]
    assert manifest(home, "with")["preset"]["name"] == "tf" and manifest(home, "without")["preset"]["name"] is None
    assert manifest(home, "without")["preset"]["framework"] == "tensorflow"


class _Files(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.server.paths.append(self.path)
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture
def served(tmp_path, wheelhouse):
    """The wheelhouse over HTTP on loopback: ``files/`` and a PEP 503 index ``simple/``; the
    paths asked for are kept."""
    root = tmp_path / "www"
    shutil.copytree(wheelhouse, root / "files")
    for wheel in (root / "files").glob("*.whl"):
        project = root / "simple" / wheel.name.split("-")[0].replace("_", "-")
        project.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        with open(project / "index.html", "a") as fh:
            fh.write(f'<a href="../../files/{wheel.name}#sha256={digest}">{wheel.name}</a>\n')
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Files, directory=str(root)))
    server.daemon_threads, server.paths = True, []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", server.paths
    server.shutdown()


def test_a_wheels_url_is_tried_then_the_index_by_name_and_hash(env, home, tmp_path, wheelhouse, served):
    base, asked = served
    path = tmp_path / "pylock.toml"
    path.write_text(_wheel_lock(wheelhouse, url=f"{base}/files"))
    r = envcheck(env, "env", "create", "by-url", "--lock", str(path))
    assert r.code == 0, r.err
    assert _packages(home, "by-url") == {"alpha": "2.0", "beta": "1.0"}
    assert "/files/alpha-2.0-py3-none-any.whl" in asked and "/files/beta-1.0-py3-none-any.whl" in asked

    asked.clear()  # a URL that leads nowhere: the package's own index has the file, by name and hash
    path.write_text(_wheel_lock(wheelhouse, url="http://127.0.0.1:9/gone", package=f'index = "{base}/simple"\n'))
    r = envcheck(env, "env", "create", "by-index", "--lock", str(path), "--installer", "pip")
    assert r.code == 0, r.err
    assert "asking the index for it by name and hash" in r.err
    assert _packages(home, "by-index") == {"alpha": "2.0", "beta": "1.0"}
    assert any(p.startswith("/simple/alpha") for p in asked)


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_a_hash_mismatch_is_said_as_one_with_either_installer(env, home, tmp_path, wheelhouse, installer):
    files = tmp_path / "files"
    shutil.copytree(wheelhouse, files)
    path = tmp_path / "pylock.toml"
    path.write_text(_wheel_lock(files))
    wheel = files / "beta-1.0-py3-none-any.whl"
    expected = hashlib.sha256(wheel.read_bytes()).hexdigest()
    shutil.copyfile(files / "alpha-1.0-py3-none-any.whl", wheel)  # another file under its name
    found = hashlib.sha256(wheel.read_bytes()).hexdigest()
    r = envcheck(env, "env", "create", "x", "--lock", str(path), "--installer", installer)
    assert r.code == 1, r.err
    assert f"hash mismatch: beta-1.0-py3-none-any.whl from {wheel}: the lock expects sha256 {expected}, " \
           f"the file has {found}" in r.err
    assert not (home / "envs" / "x").exists()


HOSTILE = {
    "a marker with a line break": ('name = "beta"\n',
                                   'name = "beta"\nmarker = "python_version >= \'3\'\\n--find-links http://127.0.0.1:9/'
                                   '\\n-r /etc/os-release"\n'),
    "a version with a line break": ('version = "1.0"', 'version = "1.0\\n-r /etc/os-release"'),
    "a control character": ('created-by = "tests"', 'created-by = "tests\\u001b[2J"'),
    "a preset that is a string": ("", '\n[tool.envcheck]\npreset = "str"\n'),
    "a platform that is a number": ("", "\n[tool.envcheck]\nplatform = 5\n"),
    "wheels that are not tables": ('wheels = [{', 'wheels = ["x", 1]\nxwheels = [{'),
    "an index with a password": ('name = "beta"\n', 'name = "beta"\nindex = "https://me:s3cret@example.org/simple"\n'),
    "a url with a password": ("file:///", "https://me:s3cret@example.org/"),
    "a tool index with a password": ("", '\n[tool.envcheck.preset]\nindexes = ["https://me:s3cret@example.org/simple"]\n'),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_nothing_from_a_hostile_lock_reaches_an_installer(env, home, tmp_path, wheelhouse, case):
    old, new = HOSTILE[case]
    text = _wheel_lock(wheelhouse)
    text = text + new if not old else text.replace(old, new, 1)
    path = tmp_path / "pylock.toml"
    path.write_text(text)
    for args in (("env", "create", "x", "--lock", str(path), "--offline", "--find-links", str(wheelhouse)),
                 ("provision", "--lock", str(path), "--name", "x", "--no-smoke")):
        r = envcheck(env, *args)
        assert r.code in (1, 2) if args[0] == "provision" else r.code == 2, (case, r.err)
        assert "Traceback" not in r.err and "internal error" not in r.err + r.out and "s3cret" not in r.err + r.out
        assert str(path) in r.err + r.out
    assert not (home / "envs" / "x").exists()


def test_a_fifo_or_a_device_as_lock_is_refused_at_once(env, home, tmp_path):
    fifo = tmp_path / "pylock.toml"
    os.mkfifo(fifo)
    for source in (fifo, Path("/dev/zero")):
        r = envcheck(env, "env", "create", "x", "--lock", str(source))
        assert r.code == 2 and "is not a regular file" in r.err, r.err
    assert not (home / "envs").exists()


GPU = """title = "torch, CUDA 12"
kind = "gpu"
framework = "torch"
requires-python = ">=3.8"
packages = ["torch>=2.8"]
[gpu]
cuda = "12.8"
"""


def test_a_gpu_preset_is_locked_with_the_newest_build_that_fits_the_target(env, home, tmp_path, wheelhouse):
    (home / "presets" / "t12.toml").write_text(GPU)
    r = envcheck(env, "env", "lock", "--preset", "t12", "--for-driver", "535.104.05", "--for-cc", "8.0",
                 "-o", str(tmp_path / "pylock.toml"), *offline(wheelhouse), "--json")
    assert r.code == 0, r.err  # the table's newest (CUDA 13) needs driver >= 580: 2.10 (CUDA 12.8) fits
    assert r.json()["packages"]["torch"] == "2.10.0" and "nvidia-cuda-runtime-cu12" in r.json()["packages"]
    r = envcheck(env, "env", "lock", "--preset", "t12", "--for-driver", "470.82.01", "--for-cc", "7.5",
                 "-o", str(tmp_path / "pylock.toml"), *offline(wheelhouse))
    assert r.code == 2 and "no GPU variant of preset t12 fits" in r.err  # no torch >= 2.8 runs on R470


def test_env_lock_says_it_made_the_lock_and_warns_of_files_only_this_host_has(env, home, tmp_path, wheelhouse):
    for target, warned in (((), False), (("--python", "3.10"), True)):
        out = tmp_path / "pylock.toml"
        r = envcheck(env, "env", "lock", "--preset", "tf", "-o", str(out), *target, *offline(wheelhouse))
        assert r.code == 0, r.err
        assert 'created-by = "envcheck"' in out.read_text()
        assert ("come only from file: URLs of this host" in r.err) is warned, r.err


def test_a_second_env_is_linked_only_from_one_made_from_the_same_sources(env, home, tmp_path, wheelhouse):
    assert envcheck(env, "env", "create", "p1", "--preset", "tf", *offline(wheelhouse)).code == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    r = envcheck(env, "env", "create", "y", "--preset", "tf", "--no-index", "--find-links", str(empty))
    assert r.code == 2 and "linked from env" not in r.err and not (home / "envs" / "y").exists(), r.err
    same = envcheck(env, "env", "create", "p2", "--preset", "tf", *offline(wheelhouse))
    assert same.code == 0 and manifest(home, "p2")["linked_from"] == "p1"


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_an_index_serving_another_file_is_a_hash_mismatch_with_either_installer(env, home, tmp_path, wheelhouse,
                                                                                  served, installer):
    base, _ = served
    path = tmp_path / "pylock.toml"
    text = _wheel_lock(wheelhouse, names=("alpha-2.0",), url="http://127.0.0.1:9/gone",
                       package=f'index = "{base}/simple"\n')
    served_digest = hashlib.sha256((wheelhouse / "alpha-2.0-py3-none-any.whl").read_bytes()).hexdigest()
    path.write_text(text.replace(served_digest, "ab" * 32))
    r = envcheck(env, "env", "create", "x", "--lock", str(path), "--installer", installer)
    assert r.code == 1, r.err
    assert f"the lock expects sha256 {'ab' * 32}, the file has {served_digest}" in r.err, r.err
    assert not (home / "envs" / "x").exists()


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_an_archive_entry_is_installed_from_its_checked_file(env, home, tmp_path, wheelhouse, installer):
    wheel = wheelhouse / "alpha-2.0-py3-none-any.whl"
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    path = tmp_path / "pylock.toml"
    path.write_text('lock-version = "1.0"\ncreated-by = "tests"\n[[packages]]\nname = "alpha"\n'
                    f'archive = {{ url = "{wheel.as_uri()}", hashes = {{ sha256 = "{digest}" }} }}\n')
    r = envcheck(env, "env", "create", "a", "--lock", str(path), "--installer", installer)
    assert r.code == 0, r.err
    assert _packages(home, "a") == {"alpha": "2.0"}
