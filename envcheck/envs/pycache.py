"""An env's bytecode in its baseline, and the bytecode that is not compiled from its source.

For every folder holding a source a ``RECORD`` lists, the baseline keeps its ``__pycache__``:
the folder's modification time and each pyc named for one of those sources by size,
modification and change time and sha256. The pycs there when the baseline is taken are the
installer's (uv and pip compile what they install) and are taken as they are, like the files
themselves; hashing them then (about 0.3 s for TensorFlow's 4,400) is what keeps later checks
from compiling.

The quick ``check`` looks only at what moved since: a pyc new in a ``__pycache__`` whose time
moved, or one whose size or times moved (written over in place moves the change time, which no
one can set). One whose bytes are still the recorded ones (the change time moves with the link
count of a linked env's shared files too) is no drift; any other is judged: its source compiled
by the env's own interpreter and the code compared (``envs.bytecode``), the only proof, since
the stamp Python trusts is forgeable. ``hashes=True`` trusts no record and judges every pyc. A
check that finds nothing moved costs a stat per ``__pycache__`` and per pyc, and no process;
one that judges starts the env's interpreter once for all it judges. Making bytecode unable to
take effect (checked-hash pycs) was not chosen: a checked-hash pyc with the hash of its real
source still runs its own code, and Python writes timestamp pycs of its own at the next import.
"""
from __future__ import annotations

import hashlib
import os
import stat
from typing import Any, Callable, NamedTuple

CACHE = "__pycache__"
BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH  # writable by the group or anyone
START_S = 30.0  # the checker's deadline: its start, then
PER_FILE_S = 0.01  # per pyc judged (compiling a module takes about a millisecond)
PER_CHECKER = 200  # pycs that make starting another checker worth it


def _sources(files: list[str]) -> dict[str, set[str]]:
    """{folder: the stems of its sources} of ``files`` (paths relative to the env)."""
    found: dict[str, set[str]] = {}
    for rel in files:
        if rel.endswith(".py"):
            folder, name = os.path.split(rel)
            found.setdefault(folder, set()).add(name[:-3])
    return found


def _stem(name: str) -> str | None:
    """The source stem of a pyc name (``S.TAG[.opt-N].pyc``), else None."""
    parts = name.split(".")
    return parts[0] if parts[-1] == "pyc" and len(parts) in (3, 4) else None


def _sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def take(env_dir: str, files: list[str]) -> dict[str, list]:
    """{``__pycache__`` relative to the env: [its mtime or None when absent, {pyc: [size, mtime,
    ctime, sha256]}]} for every folder holding one of ``files``' sources."""
    root = os.path.join(env_dir, "")
    record: dict[str, list] = {}
    for folder, stems in _sources(files).items():
        cache = os.path.join(folder, CACHE)
        try:
            mtime = os.stat(root + cache).st_mtime_ns
            names = os.listdir(root + cache)
        except OSError:
            record[cache] = [None, {}]
            continue
        pycs = {}
        for name in names:
            if _stem(name) in stems:
                path = os.path.join(root + cache, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                pycs[name] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, _sha256(path)]
        record[cache] = [mtime, pycs]
    return record


class Found(NamedTuple):
    bad: list[str]  # pycs (relative to the env) the env's interpreter would run, not from their source
    stated: int  # pycs stat'ed
    hashed: int  # of which hashed (their stamp moved)
    judged: int  # of which judged against their source compiled
    record: dict[str, list]  # the record as found, the bad pycs left out (so they are judged again)
    note: str | None  # why bytecode could not be judged (then every pyc judged counts as bad)


def check(env_dir: str, recorded: dict[str, list] | None, files: Callable[[], list[str]], hashes: bool,
          writable: Callable[[str, os.stat_result], None]) -> Found:
    """The env's bytecode against the baseline's ``recorded`` (None: a baseline from before
    bytecode was kept: every pyc is judged, once); ``files``: every recorded file relative to
    the env, asked only when a folder must be listed; ``writable`` hears each path stat'ed that
    its group or anyone may write."""
    root = os.path.join(env_dir, "")
    sources: dict[str, set[str]] | None = None
    if recorded is None:
        sources = _sources(files())
        recorded = {os.path.join(folder, CACHE): [None, {}] for folder in sources}
        hashes = True
    now: dict[str, list] = {}
    moved: list[tuple[str, str]] = []  # (cache, pyc name)
    stated = hashed = 0
    stat_of = os.stat
    for cache, (mtime, pycs) in recorded.items():
        try:
            st = os.stat(root + cache)
        except OSError:
            now[cache] = [None, {}]
            continue
        if st.st_mode & BY_OTHERS:
            writable(cache, st)
        if hashes or st.st_mtime_ns != mtime:
            sources = sources if sources is not None else _sources(files())
            stems = sources.get(os.path.dirname(cache), set())
            try:
                names = [n for n in os.listdir(root + cache) if _stem(n) in stems]
            except OSError:
                names = []
        else:
            names = pycs  # no name came or went, but any could be written over in place
        prefix = root + cache + os.sep
        found = {}
        for name in names:
            try:
                pyc = stat_of(prefix + name)
            except OSError:
                continue
            if pyc.st_mode & BY_OTHERS:
                writable(os.path.join(cache, name), pyc)
            was = pycs.get(name)
            if not hashes and was is not None and was[2] == pyc.st_ctime_ns and was[1] == pyc.st_mtime_ns \
                    and was[0] == pyc.st_size:
                found[name] = was
                continue
            found[name] = [pyc.st_size, pyc.st_mtime_ns, pyc.st_ctime_ns, _sha256(prefix + name)]
            hashed += 1
            if hashes or was is None or was[3:] != found[name][3:]:
                moved.append((cache, name))
        stated += len(found)
        now[cache] = [st.st_mtime_ns, found]
    bad, why = _judge(env_dir, moved)
    for cache, name in moved:
        if os.path.join(cache, name) in bad:
            now[cache][1].pop(name, None)
            now[cache][0] = None  # list the folder again next time
    return Found(sorted(bad), stated, hashed, len(moved), now, why)


def _judge(env_dir: str, pycs: list[tuple[str, str]]) -> tuple[set[str], str | None]:
    """The pycs (relative to the env) the env's interpreter would load that are not compiled
    from their source, and why they could not be judged (then all of them count). Many are
    shared among up to a checker per CPU (``--hashes`` compiles every module of the env)."""
    if not pycs:
        return set(), None
    from concurrent.futures import ThreadPoolExecutor

    from .metadata import env_python

    root = os.path.join(env_dir, "")
    rels = {root + os.path.join(cache, name): os.path.join(cache, name) for cache, name in pycs}
    pairs = [[root + os.path.join(cache, name), root + os.path.join(os.path.dirname(cache), _stem(name) + ".py")]
             for cache, name in pycs]
    python = env_python(env_dir)
    workers = max(1, min(os.cpu_count() or 1, len(pairs) // PER_CHECKER))
    with ThreadPoolExecutor(workers) as pool:
        answers = list(pool.map(lambda chunk: _ask(python, chunk), [pairs[i::workers] for i in range(workers)]))
    why = next((answer for answer in answers if isinstance(answer, str)), None)
    if why is not None:
        return set(rels.values()), why
    return {rels[path] for answer in answers for path in answer}, None


def _ask(python: str, pairs: list[list[str]]) -> list[str] | str:
    """The pycs of ``pairs`` ([pyc, source]) the env's ``python`` says are not compiled from
    their source, or why it gave no answer."""
    import json
    import tempfile

    from .. import processes
    from ..child_env import clean_environ
    from . import bytecode

    limit = START_S + PER_FILE_S * len(pairs)
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as listing:
        json.dump(pairs, listing)
        listing.flush()
        try:
            done = processes.run([python, "-I", "-S", "-B", bytecode.__file__, listing.name],
                                 timeout=limit, env=clean_environ())
        except OSError as exc:
            return f"the env's interpreter {python} can't be run: {exc.strerror or exc}"
    if done.timed_out:
        return f"the env's interpreter gave no answer within {limit:g} s"
    try:
        answer: Any = json.loads(done.stdout)
        asked = {pyc for pyc, _ in pairs}
        if all(path in asked for path in answer["bad"]):
            return list(answer["bad"])
    except (ValueError, KeyError, TypeError):
        pass
    last = (done.stderr.strip().splitlines() or ["no answer"])[-1][:200]
    return f"the env's interpreter could not judge it: {last}"
