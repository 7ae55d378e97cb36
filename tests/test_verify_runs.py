"""`env verify` sees what runs (issue 26.5): bytecode Python would run in place of its source
that is not compiled from it, a stray pyc Python runs where no source is, an edited
`pyvenv.cfg`, and files others may write. Each hostile input is made here, with the env's own
interpreter, and shown to take effect before `verify` is asked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env
from test_locks import SITE, env, offline  # noqa: F401  (env: the fixture)
from test_select import envcheck

pytestmark = pytest.mark.timeout(300)

# Compiles OTHER (argv[2]) into the pyc Python loads for SOURCE (argv[1]), its header made to
# pass Python's check: the source's modification time and size, or (argv[3] == "unchecked-hash")
# a hash-based pyc Python loads without looking at the source.
PLANT = """import importlib.util, marshal, os, sys
source, other, how = sys.argv[1], sys.argv[2], sys.argv[3]
code = compile(other, source, "exec", dont_inherit=True)
st = os.stat(source)
if how == "timestamp":
    header = (0).to_bytes(4, "little") + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") \\
        + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
else:
    header = (1).to_bytes(4, "little") + bytes(8)
with open(importlib.util.cache_from_source(source), "wb") as fh:  # written over in place
    fh.write(importlib.util.MAGIC_NUMBER + header + marshal.dumps(code))
"""


@pytest.fixture
def made(env, home, wheelhouse) -> Path:  # noqa: F811
    r = envcheck(env, "env", "create", "t", "--preset", "tf", *offline(wheelhouse))
    assert r.code == 0, r.err
    return home / "envs" / "t"


def python(env_dir: Path, *args: str) -> str:
    """What the env's interpreter prints, writing bytecode as Python does by default."""
    environ = {k: v for k, v in clean_env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([str(env_dir / "bin" / "python"), *args], capture_output=True, text=True, timeout=60,
                          env=environ)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def verify(env: dict, *args: str):  # noqa: F811
    r = envcheck(env, "env", "verify", "t", "--json", *args)
    assert r.code in (0, 1), r.err
    return r.code, r.json()


@pytest.mark.parametrize("how", ["timestamp", "unchecked-hash"])
def test_bytecode_not_compiled_from_its_source_is_drift(env, made, how):  # noqa: F811
    source = made / SITE / "beta" / "__init__.py"
    assert python(made, "-c", "import beta; print(beta.__version__)") == "1.0"
    python(made, "-c", PLANT, str(source), "__version__ = 'planted'\n", how)
    assert python(made, "-c", "import beta; print(beta.__version__)") == "planted"  # it runs

    cache = python(made, "-c", f"import importlib.util; print(importlib.util.cache_from_source({str(source)!r}))")
    planted = os.path.relpath(cache, made)
    for mode in ((), ("--hashes",)):
        code, found = verify(env, *mode)
        assert code == 1 and found["files"]["bytecode"] == [planted], found
        assert found["counts"]["bytecode"] == 1 and found["files"]["edited"] == []
    text = envcheck(env, "env", "verify", "t")
    assert text.code == 1 and f"pyc not compiled from its source: {planted}" in text.out
    validated = envcheck(env, "validate", "t", "--no-smoke", "--json")
    integrity = next(c for c in validated.json()["reports"][0]["checks"] if c["id"] == "integrity")
    assert validated.code == 1 and "pyc(s) not compiled from their source" in integrity["summary"]

    os.unlink(cache)  # Python compiles the source again: no drift once it has
    python(made, "-c", "import beta")
    assert verify(env)[0] == 0 and verify(env, "--hashes")[0] == 0


def test_bytecode_judged_by_several_checkers_at_once_is_judged_the_same(made, monkeypatch):
    """Many pycs are shared among a checker per CPU: one checker per pyc here, and the one
    planted is still the one named."""
    from envcheck.envs import pycache, verify

    source = made / SITE / "beta" / "__init__.py"
    python(made, "-c", PLANT, str(source), "__version__ = 'planted'\n", "timestamp")
    monkeypatch.setattr(pycache, "PER_CHECKER", 1)
    monkeypatch.setattr(pycache.os, "cpu_count", lambda: 64)
    drift = verify.verify(str(made), verify.read(str(made)), hashes=True)
    assert drift.compiled > 2 and drift.bytecode_note is None
    assert [os.path.basename(p) for p in drift.files["bytecode"]] == [f"__init__.{sys.implementation.cache_tag}.pyc"]


def test_a_stray_pyc_python_runs_where_no_source_is_is_an_added_file(env, made):  # noqa: F811
    site = made / SITE
    python(made, "-c", "import marshal, importlib.util, sys; open(sys.argv[1], 'wb').write("
           "importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(compile('print(\"planted\")', 'x', 'exec')))",
           str(site / "sitecustomize.pyc"))
    assert python(made, "-c", "pass") == "planted"  # site imports it at every start
    code, found = verify(env)
    assert code == 1 and found["files"]["added"] == [f"{SITE}/sitecustomize.pyc"], found


def test_bytecode_python_writes_itself_is_no_drift(env, made):  # noqa: F811
    """Bytecode the env's interpreter compiles from the sources (a module's first import,
    `-O`'s own pycs) is what runs: judged once, then recorded, so the next check is quick;
    one whose times moved and bytes did not (a linked env's shared pyc) is hashed, not judged."""
    cache = made / SITE / "beta" / "__pycache__"
    for pyc in cache.iterdir():
        pyc.unlink()
    python(made, "-c", "import beta")
    python(made, "-O", "-c", "import beta")
    tag = sys.implementation.cache_tag
    assert sorted(p.name for p in cache.iterdir()) == [f"__init__.{tag}.opt-1.pyc", f"__init__.{tag}.pyc"]
    code, found = verify(env)
    assert code == 0 and found["compiled"] >= 1, found  # -O's is new (the other may be byte for byte uv's)
    code, again = verify(env)
    assert code == 0 and again["compiled"] == 0  # recorded: stat'ed, not compiled again
    code, everything = verify(env, "--hashes")
    assert code == 0 and everything["compiled"] >= 2
    for pyc in cache.iterdir():
        os.link(pyc, pyc.with_suffix(".link"))  # the link count, so the change time, moves
        pyc.with_suffix(".link").unlink()
    code, moved = verify(env)
    assert code == 0 and moved["compiled"] == 0 and moved["hashed"] >= 2


def test_pyvenv_cfg_edited_is_drift(env, made):  # noqa: F811
    cfg = made / "pyvenv.cfg"
    text = cfg.read_text()
    assert "include-system-site-packages = false" in text
    system_site = f"import sys; print(any(p.startswith(sys.base_prefix) and p.endswith('site-packages') for p in sys.path))"
    assert python(made, "-c", system_site) == "False"
    cfg.write_text(text.replace("include-system-site-packages = false", "include-system-site-packages = true"))
    assert python(made, "-c", system_site) == "True"  # the machine's packages are in
    code, found = verify(env)
    assert code == 1 and found["files"]["changed"] + found["files"]["edited"] == ["pyvenv.cfg"], found
    assert verify(env, "--hashes")[0] == 1


def test_files_others_may_write_are_named_by_verify_and_degrade_validate(env, made):  # noqa: F811
    module = made / SITE / "beta" / "__init__.py"
    folder = made / SITE / "alpha"
    module.chmod(module.stat().st_mode | 0o002)  # o+w
    folder.chmod(folder.stat().st_mode | 0o020)  # g+w: anyone in the group may add a module
    code, found = verify(env)
    assert code == 0 and found["clean"]  # not drift: the bytes are what was installed
    assert found["writable"] == {"count": 2, "files": [f"{SITE}/beta/__init__.py", f"{SITE}/alpha"]}, found
    text = envcheck(env, "env", "verify", "t")
    assert text.code == 0 and f"writable by others: {SITE}/beta/__init__.py" in text.out
    assert f"chmod -R go-w {made}" in text.out

    validated = envcheck(env, "validate", "t", "--no-smoke", "--json")
    report = validated.json()["reports"][0]
    integrity = next(c for c in report["checks"] if c["id"] == "integrity")
    assert validated.code == 0 and report["verdict"] == "degraded", validated.out
    assert integrity["status"] == "warn" and integrity["summary"].startswith("2 file(s) writable by others: ")
    assert f"{SITE}/beta/__init__.py" in integrity["summary"] and "go-w" in integrity["fix"]
    assert envcheck(env, "validate", "t", "--no-smoke", "--strict").code == 1

    module.chmod(0o644)
    folder.chmod(0o755)
    validated = envcheck(env, "validate", "t", "--no-smoke", "--json")
    assert json.loads(validated.out)["reports"][0]["verdict"] == "ready"


def test_envcheck_makes_envs_only_their_owner_may_write_whatever_the_umask(env, home, wheelhouse):  # noqa: F811
    done = subprocess.run([sys.executable, "-m", "envcheck", "env", "create", "t", "--preset", "tf", "--no-link",
                           *offline(wheelhouse)], capture_output=True, text=True, env=env, umask=0o002, timeout=300)
    assert done.returncode == 0, done.stderr
    code, found = verify(env)
    assert code == 0 and found["writable"] == {"count": 0, "files": []}, found
    module = home / "envs" / "t" / SITE / "beta" / "__init__.py"
    assert module.stat().st_mode & 0o022 == 0
