"""Faults lose nothing: real SIGKILLs at each step of `env add`, `env remove` and `env create`,
concurrent changes, index credentials, a read-only home and a full disk.

A kill at a precise step: envcheck runs in a child whose ``RUNNER`` wraps one store step to
SIGKILL its own process there (a real, uncatchable kill, as an OOM killer or `kill -9` gives);
a kill mid-install uses the gated find-links server (``slow_links``) with the real installer.
After every kill, the next envcheck command must leave each env exactly as before or fully
changed, and ``tmp/`` empty, saying on stderr what it restored or removed.
"""
from __future__ import annotations

import base64
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import clean_env
from test_env import TINY, start, tree_digest
from wheelhouse import offline

RUNNER = r"""
import os, shutil, signal, sys, time
from pathlib import Path

point, args = sys.argv[1], sys.argv[2:]
marks = Path(os.environ["FAULT_MARKS"])


def die():
    (marks / "reached").touch()
    os.kill(os.getpid(), signal.SIGKILL)


import envcheck.envs.installers as installers
import envcheck.envs.manifest as mf
import envcheck.envs.store as store

real_write, real_replace, real_rmtree, real_link = mf.write_atomic, os.replace, shutil.rmtree, os.link
real_install, real_changing = installers.Installer.install, store.EnvStore._changing
links = []


def write_atomic(path, data):
    if point == "create:first-manifest" and ".create-" in str(path):
        (path.parent / f".{path.name}.half.tmp").write_text('{"schema": "envc')
        die()
    if point == "add:marked" and data.get("state") == "changing":
        die()
    real_write(path, data)
    if point == "add:committed" and path.name == "envcheck.json" and data.get("state") == "ready":
        die()


def replace(src, dst):
    if point == "add:rollback" and ".backup-" in str(src):
        die()  # between the rollback's two renames: the env folder is gone, the backup not back yet
    if point == "remove:renaming" and ".removing-" in str(dst):
        die()
    return real_replace(src, dst)


def rmtree(path, *a, **k):
    if point == "remove:deleting" and ".removing-" in str(path):
        real_rmtree(Path(path) / "lib")
        die()
    return real_rmtree(path, *a, **k)


def link(*a, **k):
    links.append(a)
    if point == "add:backup" and len(links) == 3:
        die()
    return real_link(*a, **k)


def install(self, *a, **k):
    real_install(self, *a, **k)
    if point == "add:installed":
        die()


def changing(self, name):
    if point == "pause":  # after the command read the env, before it takes the lock
        (marks / "reached").touch()
        while not (marks / "go").exists():
            time.sleep(0.05)
    return real_changing(self, name)


mf.write_atomic, os.replace, shutil.rmtree, os.link = write_atomic, replace, rmtree, link
installers.Installer.install, store.EnvStore._changing = install, changing
from envcheck.cli import run

run(args)
"""


def fault(home: Path, tmp_path: Path, point: str, *args: str) -> tuple[subprocess.Popen, Path]:
    marks = tmp_path / f"marks-{point.replace(':', '-')}-{time.monotonic_ns()}"
    marks.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, point, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=clean_env(ENVCHECK_HOME=str(home), FAULT_MARKS=str(marks)))
    return proc, marks


def killed_at(home: Path, tmp_path: Path, point: str, *args: str) -> None:
    proc, marks = fault(home, tmp_path, point, *args)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL and (marks / "reached").exists(), (point, proc.returncode, err)


def scratch(home: Path) -> list[str]:
    folder = home / "tmp"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def manifest(home: Path, name: str = "dl") -> dict:
    return json.loads((home / "envs" / name / "envcheck.json").read_text())


@pytest.fixture
def dl(cli, home: Path, wheelhouse: Path) -> str:
    """Env ``dl`` made from the tiny preset (alpha 1.0); returns its tree digest."""
    (home / "presets").mkdir()
    (home / "presets" / "tiny.toml").write_text(TINY)
    r = cli("env", "create", "dl", "--preset", "tiny", *offline(wheelhouse))
    assert r.code == 0, r.err
    return tree_digest(home / "envs" / "dl")


# -- env add ---------------------------------------------------------------------------------

@pytest.mark.parametrize("point, req, outcome, said", [
    ("add:backup", "beta", "before", "removed"),  # while hard-linking the backup
    ("add:marked", "beta", "before", "removed"),  # intent written, manifest not yet `changing`
    ("add:installed", "beta", "before", "rolled back"),  # installed, not committed: half a change
    ("add:committed", "beta", "after", "removed"),  # committed, backup not yet deleted
    ("add:rollback", "gamma", "before", "rolled back"),  # a failed install's rollback, cut in half
])
def test_sigkill_at_each_step_of_add_leaves_the_env_as_before_or_added(cli, home, wheelhouse, tmp_path, dl,
                                                                        point, req, outcome, said):
    killed_at(home, tmp_path, point, "env", "add", "dl", req, *offline(wheelhouse))
    assert scratch(home), "the kill should leave something to recover"
    if point == "add:installed":  # visibly incomplete until recovered, never `ready` with half a change
        assert manifest(home)["state"] == "changing"
    if point == "add:rollback":
        assert not (home / "envs" / "dl").exists()

    r = cli("env", "list", "--json")
    assert r.code == 0 and "Traceback" not in r.err
    (env,) = r.json()["envs"]
    assert env["name"] == "dl" and env["state"] == "ready"
    notices = [ln for ln in r.err.splitlines() if ln.startswith("envcheck: env dl: ")]
    assert notices and any(said in ln for ln in notices), r.err
    assert scratch(home) == []
    if outcome == "before":
        assert tree_digest(home / "envs" / "dl") == dl
        assert "beta" not in env["packages"] and env["requested"] == ["alpha==1.0"]
    else:
        assert env["packages"]["beta"] == "1.0" and env["requested"] == ["alpha==1.0", "beta"]
    assert cli("env", "list", "--json").err == ""  # settled once, quiet after
    again = cli("env", "add", "dl", "beta", *offline(wheelhouse))
    assert again.code == 0, again.err


def test_sigkill_mid_install_is_incomplete_while_locked_then_restored(cli, home, wheelhouse, slow_links, dl):
    url, requested, _ = slow_links
    proc = start(home, "env", "add", "dl", "beta", "--no-index", "--find-links", url)
    assert requested.wait(60), "the installer never reached the index"
    assert manifest(home)["state"] == "changing"
    assert any(name.startswith("dl.add-") for name in scratch(home))
    (env,) = cli("env", "list", "--json").json()["envs"]  # the lock is held: no recovery, no false `ready`
    assert env["state"] == "incomplete" and "env add" in env["problem"] and env["fix"]
    proc.kill()
    proc.wait()

    r = cli("env", "list", "--json")
    (env,) = r.json()["envs"]
    assert env["state"] == "ready" and "rolled back an interrupted `env add`" in r.err
    assert tree_digest(home / "envs" / "dl") == dl and scratch(home) == []


def test_ctrl_c_pressed_again_and_again_during_add_restores_the_env(cli, home, slow_links, dl):
    """Ctrl-C repeated every millisecond: the later ones land in the rollback, which holds them."""
    url, requested, _ = slow_links
    proc = start(home, "env", "add", "dl", "beta", "--no-index", "--find-links", url)
    assert requested.wait(60)
    deadline = time.monotonic() + 0.5
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(signal.SIGINT)
        time.sleep(0.001)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode in (130, -signal.SIGINT), err  # -SIGINT: one more landed after the exit line
    assert "Traceback" not in err
    assert tree_digest(home / "envs" / "dl") == dl
    (env,) = cli("env", "list", "--json").json()["envs"]
    assert env["state"] == "ready" and scratch(home) == []


def test_add_reads_the_env_under_its_lock_not_before(cli, home, wheelhouse, tmp_path, dl):
    """An add paused after its first look, across `env remove && env create` of the same name,
    changes the new env, not a stale copy of the old one."""
    (home / "presets" / "tiny2.toml").write_text(TINY.replace("alpha==1.0", "alpha==2.0"))
    paused, marks = fault(home, tmp_path, "pause", "env", "add", "dl", "beta", *offline(wheelhouse))
    deadline = time.monotonic() + 60
    while not (marks / "reached").exists():
        assert time.monotonic() < deadline and paused.poll() is None, paused.communicate()
        time.sleep(0.05)
    assert cli("env", "remove", "dl", "--yes").code == 0
    assert cli("env", "create", "dl", "--preset", "tiny2", *offline(wheelhouse)).code == 0
    (marks / "go").touch()
    out, err = paused.communicate(timeout=300)
    assert paused.returncode == 0, err
    data = manifest(home)
    assert data["preset"]["name"] == "tiny2" and data["requested"] == ["alpha==2.0", "beta"]
    assert data["packages"]["alpha"] == "2.0" and data["packages"]["beta"] == "1.0"


def test_concurrent_adds_lose_no_requirement(cli, home, wheelhouse, tmp_path, dl):
    paused, marks = fault(home, tmp_path, "pause", "env", "add", "dl", "alpha==2.0", *offline(wheelhouse))
    deadline = time.monotonic() + 60
    while not (marks / "reached").exists():
        assert time.monotonic() < deadline and paused.poll() is None
        time.sleep(0.05)
    assert cli("env", "add", "dl", "beta", *offline(wheelhouse)).code == 0
    (marks / "go").touch()
    out, err = paused.communicate(timeout=300)
    assert paused.returncode == 0, err
    assert manifest(home)["requested"] == ["alpha==1.0", "beta", "alpha==2.0"]


# -- env remove and env create ---------------------------------------------------------------

def test_sigkill_before_removes_rename_leaves_the_env(cli, home, tmp_path, dl):
    killed_at(home, tmp_path, "remove:renaming", "env", "remove", "dl", "--yes")
    r = cli("env", "list", "--json")
    (env,) = r.json()["envs"]
    assert env["state"] == "ready" and tree_digest(home / "envs" / "dl") == dl and scratch(home) == []


def test_sigkill_during_removes_delete_is_finished_by_the_next_command(cli, home, wheelhouse, tmp_path, dl):
    killed_at(home, tmp_path, "remove:deleting", "env", "remove", "dl", "--yes")
    assert [n for n in scratch(home) if n.startswith("dl.removing-")]
    r = cli("env", "list", "--json")
    assert r.json()["envs"] == [] and scratch(home) == []
    assert "removed" in r.err and "interrupted `env remove`" in r.err
    assert cli("env", "create", "dl", "--preset", "tiny", *offline(wheelhouse)).code == 0


def test_sigkill_during_creates_first_manifest_write(cli, home, wheelhouse, tmp_path, dl):
    assert cli("env", "remove", "dl", "--yes").code == 0
    killed_at(home, tmp_path, "create:first-manifest", "env", "create", "dl", "--preset", "tiny",
              *offline(wheelhouse))
    assert not (home / "envs" / "dl").exists()  # the env appears with its manifest or not at all
    gone = cli("env", "remove", "dl", "--yes")
    assert gone.code == 2 and "no env named 'dl'" in gone.err
    assert "interrupted `env create`" in gone.err and scratch(home) == []
    r = cli("env", "create", "dl", "--preset", "tiny", *offline(wheelhouse))
    assert r.code == 0, r.err


def test_a_stub_left_by_an_older_create_is_incomplete_and_removable(cli, home, wheelhouse):
    stub = home / "envs" / "dl"
    stub.mkdir(parents=True)
    (stub / ".envcheck.json.k2j3.tmp").write_text('{"sche')
    (env,) = cli("env", "list", "--json").json()["envs"]
    assert env["state"] == "incomplete" and env["fix"]
    assert cli("env", "remove", "dl", "--yes").code == 0 and not stub.exists()


# -- credentials -----------------------------------------------------------------------------

SECRET = "s3cr3t"


class _AuthIndex(http.server.BaseHTTPRequestHandler):
    """A PEP 503 index of the wheelhouse that wants Basic auth (alice:s3cr3t); an authorized
    request marks ``authorized`` and is answered once ``release`` is set."""

    def do_HEAD(self):  # noqa: N802 (uv asks whether ranges are served)
        self.do_GET(body=False)

    def do_GET(self, body: bool = True):  # noqa: N802 (http.server's name)
        server = self.server
        if self.headers.get("Authorization") != "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode():
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="index"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        server.authorized.set()
        server.release.wait(60)
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if len(parts) == 2 and parts[0] == "simple":
            stem = parts[1].replace("-", "_")
            links = "".join(f'<a href="/files/{w.name}">{w.name}</a>\n'
                            for w in sorted(server.wheels.glob(f"{stem}-*.whl")))
            data, kind = f"<html><body>{links}</body></html>".encode(), "text/html"
        elif len(parts) == 2 and parts[0] == "files" and (server.wheels / parts[1]).is_file():
            data, kind = (server.wheels / parts[1]).read_bytes(), "application/octet-stream"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def auth_index(wheelhouse: Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AuthIndex)
    server.daemon_threads = True
    server.wheels, server.authorized, server.release = wheelhouse, threading.Event(), threading.Event()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.release.set()
    server.shutdown()


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_index_credentials_reach_the_installer_and_nothing_else(cli, home, auth_index, installer):
    url = f"http://alice:{SECRET}@127.0.0.1:{auth_index.server_port}/simple/"
    (home / "presets").mkdir()
    (home / "presets" / "tiny.toml").write_text(TINY)
    proc = start(home, "env", "create", "dl", "--preset", "tiny", "--installer", installer, "--index-url", url)
    assert auth_index.authorized.wait(120), "the installer never sent the credentials"
    running = [cmdline(pid) for pid in descendants(proc.pid)]
    assert any(" install " in line for line in running), running
    assert not [line for line in running if SECRET in line], "a password on an installer's command line"
    (log,) = (home / "logs").iterdir()
    assert log.stat().st_mode & 0o777 == 0o600 and (home / "logs").stat().st_mode & 0o077 == 0
    assert SECRET not in log.read_text() and "$ " in log.read_text()
    auth_index.release.set()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert SECRET not in out + err
    assert SECRET not in (home / "envs" / "dl" / "envcheck.json").read_text()
    assert manifest(home)["index"]["index_url"].startswith("http://***@127.0.0.1")

    bad = cli("env", "add", "dl", "gamma", "--index-url", url)  # unresolvable: the error names the index
    assert bad.code == 2 and SECRET not in bad.err and "***@127.0.0.1" in bad.err

    auth_index.release.clear()
    auth_index.authorized.clear()
    proc = start(home, "env", "add", "dl", "beta", "--index-url", url)
    assert auth_index.authorized.wait(120)
    proc.kill()  # the log of a killed add stays: it must hold no password either
    proc.wait()
    for log in (home / "logs").iterdir():
        assert SECRET not in log.read_text() and log.stat().st_mode & 0o777 == 0o600
    r = cli("env", "list", "--json")
    assert SECRET not in r.out + r.err


def test_index_locations_travel_in_the_installers_variables(tmp_path):
    from envcheck.envs.indexes import IndexSettings, settings_from_pip_config
    from envcheck.envs.installers import PipInstaller, UvInstaller

    secret = f"https://alice:{SECRET}@mirror.example/simple"
    index = settings_from_pip_config([]).merged(IndexSettings.from_options(
        secret, [secret + "2", "https://plain.example/simple"], [f"https://alice:{SECRET}@files.example/", "/w h"]))
    python = tmp_path / "bin" / "python"
    for backend, sep in ((UvInstaller(), ","), (PipInstaller(), " ")):
        prefix = backend.name.upper()
        assert SECRET not in " ".join(backend.install_command(python, ["alpha"], index))
        env = backend.environ(index)
        assert env[f"{prefix}_INDEX_URL"] == secret
        assert env[f"{prefix}_EXTRA_INDEX_URL"] == f"{secret}2 https://plain.example/simple"
        assert env[f"{prefix}_FIND_LINKS"] == f"https://alice:{SECRET}@files.example/{sep}/w h"
    plain = IndexSettings.from_options(None, (), ["/w h"], True)
    assert "--find-links" in UvInstaller().install_command(python, ["alpha"], plain)  # a path with a space stays whole
    assert "UV_FIND_LINKS" not in UvInstaller().environ(plain)
    assert SECRET not in json.dumps(index.to_json()) and SECRET not in index.describe()


def test_a_bad_index_url_never_echoes_its_password(cli, home):
    r = cli("env", "create", "dl", "--preset", "tensorflow-cpu", "--index-url", f"http://bob:{SECRET}@host/a b")
    assert r.code == 2 and SECRET not in r.err and "***@host" in r.err
    assert list(home.iterdir()) == []


# -- the disk: read-only, full ---------------------------------------------------------------

def in_mount_namespace(script: str, **env: str) -> subprocess.CompletedProcess:
    """Run a shell script as root in a private mount namespace (so its mounts vanish with it)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare for a private mount namespace")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"can't mount in a private namespace: {probe.stderr.decode().strip()}")
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=600,
                          env=clean_env(PY=sys.executable, **env))


def error_line(err: str) -> str:
    """The one line envcheck printed (run with -q: no progress lines)."""
    (line,) = [ln for ln in err.splitlines() if ln.startswith("envcheck:")]
    assert "Traceback" not in err and "internal error" not in line
    return line


def test_a_read_only_home_is_read_and_every_change_says_why(home, wheelhouse, tmp_path, dl):
    (home / "tmp").mkdir(exist_ok=True)
    (home / "tmp" / "dl.removing-999999").mkdir()  # a leftover reading can't clean on a read-only home
    before = tree_digest(home)
    out = tmp_path / "out"
    out.mkdir()
    links = " ".join(offline(wheelhouse))
    script = f"""
mount --bind "$H" "$H" && mount -o remount,ro,bind "$H" || exit 99
run() {{ what=$1; shift; "$PY" -m envcheck -q "$@" >"$O/$what.out" 2>"$O/$what.err"; echo $? >"$O/$what.rc"; }}
run list env list --json
run show env show dl
run create env create other --preset tiny {links}
run add env add dl beta {links}
run remove env remove dl --yes
"""
    r = in_mount_namespace(script, H=str(home), O=str(out), ENVCHECK_HOME=str(home))
    assert r.returncode == 0, r.stderr
    code = {p.stem: int(p.read_text()) for p in out.glob("*.rc")}
    assert code["list"] == 0 and code["show"] == 0
    (env,) = json.loads((out / "list.out").read_text())["envs"]
    assert env["state"] == "ready"
    for what in ("create", "add", "remove"):
        line = error_line((out / f"{what}.err").read_text())
        assert code[what] == 1 and "read-only" in line and str(home) in line and "fix:" in line, (what, line)
    assert tree_digest(home) == before


def test_a_full_disk_fails_add_with_where_and_changes_nothing(home, wheelhouse, tmp_path):
    preset = tmp_path / "tiny.toml"
    preset.write_text(TINY)
    out = tmp_path / "out"
    out.mkdir()
    links = " ".join(offline(wheelhouse))
    digest = f"{sys.executable} -c 'import sys; sys.path.insert(0, \"{Path(__file__).parent}\"); " \
             f"from test_env import tree_digest; from pathlib import Path; print(tree_digest(Path(sys.argv[1])))'"
    script = f"""
run() {{ what=$1; shift; "$PY" -m envcheck -q "$@" >"$O/$what.out" 2>"$O/$what.err"; echo $? >"$O/$what.rc"; }}
mount -t tmpfs -o size=16m tmpfs "$H" || exit 99
run create env create dl --preset-file {preset} {links}
{digest} "$H/envs/dl" >"$O/before"
dd if=/dev/zero of="$H/filler" bs=4k 2>/dev/null
run add env add dl beta {links}
rm "$H/filler"
{digest} "$H/envs/dl" >"$O/after"
ls -A "$H/tmp" >"$O/tmp" 2>/dev/null
umount "$H"
mount -t tmpfs -o size=16m,nr_inodes=400 tmpfs "$H" || exit 99
run create2 env create dl --preset-file {preset} {links}
i=0; while touch "$H/f$i" 2>/dev/null; do i=$((i+1)); done
run add2 env add dl beta {links}
"""
    r = in_mount_namespace(script, H=str(home), O=str(out), ENVCHECK_HOME=str(home))
    assert r.returncode == 0, r.stderr
    code = {p.stem: int(p.read_text()) for p in out.glob("*.rc")}
    assert code["create"] == 0, (out / "create.err").read_text()
    line = error_line((out / "add.err").read_text())
    assert code["add"] == 1 and "no space left" in line and str(home) in line and "fix:" in line, line
    assert (out / "before").read_text() == (out / "after").read_text()
    assert (out / "tmp").read_text() == ""
    assert code["create2"] == 0, (out / "create2.err").read_text()
    line = error_line((out / "add2.err").read_text())
    assert code["add2"] == 1 and ("no free inodes" in line or "no space left" in line) and "fix:" in line, line


def test_the_gate_answers_from_its_stored_report_on_a_read_only_home(cli, home, dl, wheelhouse, tmp_path):
    (home / "presets" / "tf.toml").write_text('title = "tf"\nkind = "cpu"\nframework = "tensorflow"\n'
                                              'packages = ["tensorflow-cpu==2.21.0"]\n')
    assert cli("env", "create", "tf", "--preset", "tf", *offline(wheelhouse)).code == 0
    assert cli("validate", "tf", "--no-smoke").code == 0
    assert cli("validate", "dl", "--no-smoke").code == 1  # no framework: a stored failure
    out = tmp_path / "out"
    out.mkdir()
    script = f"""
mount --bind "$H" "$H" && mount -o remount,ro,bind "$H" || exit 99
for env in tf dl; do
  "$PY" -m envcheck check --env $env --json >"$O/$env.out" 2>"$O/$env.err"; echo $? >"$O/$env.rc"
done
"""
    r = in_mount_namespace(script, H=str(home), O=str(out), ENVCHECK_HOME=str(home))
    assert r.returncode == 0, r.stderr
    for env, ready in (("tf", True), ("dl", False)):
        err = (out / f"{env}.err").read_text()
        assert "internal error" not in err and "Traceback" not in err, err
        answer = json.loads((out / f"{env}.out").read_text())
        assert answer["ready"] is ready and int((out / f"{env}.rc").read_text()) == (0 if ready else 1)
    assert json.loads((out / "tf.out").read_text())["cached"]  # answered from the stored pass
    assert "was not stored: Read-only file system" in (out / "dl.err").read_text()
