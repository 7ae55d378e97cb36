"""How envcheck starts child processes: installers, interpreter and library probes, the smoke
runner, and the command of ``envcheck run``. Nothing else in envcheck calls ``subprocess``.

Every child gets:

- a known environment, from ``child_env``: ``clean_environ`` for installers and interpreter
  probes, ``child_environ(env, gpus=…, framework=…, purpose=…)`` for anything started in an
  env or for one (its purpose, run, kernel, smoke, probe or fleet, decides what is added).
  Those names are re-exported here: whoever starts a child hands it one of them;
- its own session and process group, so a Ctrl-C at the terminal reaches envcheck alone,
  and stopping the child (``Child.stop``: SIGTERM, ``grace`` seconds, SIGKILL) stops all it
  started;
- a deadline (``run``): a limit that progress on stderr may extend, and a bound it may not;
- its output decoded as UTF-8 with replacement: a child's bytes never raise.

Dying with envcheck, whatever ends it. While a child runs (``started``, ``run``), SIGTERM and
SIGHUP raise ``Interrupted``, a KeyboardInterrupt, so they take Ctrl-C's path: stop the
child's tree, remove temporary files, exit 130. In envcheck's command line only the first
interrupt raises (``end_at_first_interrupt``, from ``_guard``): a second one, landing in the
clean-up or the interpreter's shutdown, would print a traceback, not stop anything sooner; and
``Child.stop`` reaps the child even when an interrupt cuts its grace short. SIGKILL can't be
caught, and neither the process group nor PR_SET_PDEATHSIG reach a grandchild that called
setsid() (the death signal is cleared on fork, setsid leaves the group). So on Linux every
child is started under a *guard*, ``_guard.py`` run by envcheck's own interpreter
(``python -I -S``, about 6 ms: it imports four standard modules, so it is a file of its own).
The guard

1. asks the kernel for SIGTERM when envcheck dies (PR_SET_PDEATHSIG), then checks that
   envcheck is still its parent, so even a SIGKILL of envcheck is noticed;
2. becomes a child subreaper (PR_SET_CHILD_SUBREAPER): a descendant orphaned on the way,
   a daemon that double-forked and called setsid included, becomes its child, not init's;
3. starts the command (with PR_SET_PDEATHSIG SIGKILL, default signal dispositions and an
   empty mask) and reports an exec failure back, raised here as Popen raises it;
4. when the command ends, kills what it left behind, then ends as the command ended (same
   exit status, or the same signal), so callers read a plain return code;
5. on SIGTERM, SIGHUP or SIGINT (``Child.stop``, or the kernel because envcheck died):
   SIGTERM to the command's group and to every orphan, up to ``grace`` seconds for the
   command to end, then SIGKILL to each descendant, round after round, until none is left;
6. if envcheck died, removes the folders of ``temporary_directory`` blocks open when it
   started the command (envcheck removes them itself otherwise).

Why not the alternatives: envcheck as the subreaper would cover the signals it can catch
but not its own SIGKILL (its orphans then go to init), and would turn a training script that
calls ``ensure_ready`` into the reaper of its own unrelated orphans. A cgroup catches every
descendant but needs systemd or cgroup delegation, which containers and CI runners often
lack. The guard needs neither; only a SIGKILL of the guard itself leaves a setsid()
descendant behind. Elsewhere (macOS), children run unguarded: own session, stopped as a
group, but not killed when envcheck is killed with SIGKILL.

``reset_signals`` is for ``envcheck run`` (and the guard's command): default dispositions and
an empty signal mask before exec, as a shell's child has them (Python ignores SIGPIPE and
SIGXFSZ, which exec would pass on).
"""
from __future__ import annotations

import math
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections import namedtuple
from contextlib import contextmanager

# Neither typing nor dataclasses imported (their imports cost more than the rest of this
# module's): `env adopt` starts its probe before the rest of envcheck is imported (envs.adopt_probe).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Callable, Iterator, Mapping, Sequence

from ._guard import Interrupted, Interrupts, end_at_first_interrupt, exit_quietly, on_interrupt, reset_signals
from .child_env import (PCI_ORDER, PURPOSES, STRIPPED, child_environ, clean_environ, env_environ, venv_of,
                        wheel_library_dirs)

__all__ = ["PCI_ORDER", "PURPOSES", "STRIPPED", "Child", "Completed", "Interrupted", "child_environ",
           "clean_environ", "end_at_first_interrupt", "env_environ", "exit_quietly", "venv_of",
           "wheel_library_dirs", "reset_signals", "Begun", "begin", "run", "signals_interrupt", "start",
           "started", "stop_all", "temporary_directory"]

GRACE_S = 2.0  # from SIGTERM to SIGKILL
GUARD_SLACK_S = 2.0  # what the guard may take beyond the grace to kill and reap its tree
POLL_S = 0.02
DEVNULL, PIPE, STDOUT = subprocess.DEVNULL, subprocess.PIPE, subprocess.STDOUT
TimeoutExpired = subprocess.TimeoutExpired
_GUARDED = sys.platform.startswith("linux")
_GUARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_guard.py")
_SCRATCH: list[str] = []  # open temporary_directory folders, for the guards to remove


# -- signals ---------------------------------------------------------------------------------

@contextmanager
def signals_interrupt() -> Iterator[None]:
    """Inside: SIGTERM and SIGHUP raise ``Interrupted`` (SIGINT raises KeyboardInterrupt
    anyway). A signal the caller ignores (``nohup``) stays ignored; outside the main thread,
    nothing changes (Python only handles signals there). After the command line's first
    interrupt the handlers stay (doing nothing): restoring SIG_DFL would let a second SIGTERM
    kill envcheck in the middle of its clean-up."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        current = signal.getsignal(sig)
        if current is not signal.SIG_IGN and current is not None:
            previous[sig] = signal.signal(sig, on_interrupt)
    try:
        yield
    finally:
        if not Interrupts.raised:  # else the command line is on its way out: later ones stay no-ops
            for sig, handler in previous.items():
                signal.signal(sig, handler)


# -- starting and stopping -------------------------------------------------------------------

def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _exited(pid: int) -> bool:
    """Has the child ``pid`` ended? It stays unreaped, so its id can't name another group."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


class Child:
    """A started command (see ``start``): Popen's ``poll``/``wait``, and ``stop`` for its tree."""

    def __init__(self, popen: subprocess.Popen, grace: float, guarded: bool):
        self.popen = popen
        self.grace = grace
        self.guarded = guarded

    @property
    def pid(self) -> int:
        """The process envcheck started (on Linux the guard), leader of the child's group."""
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def poll(self) -> int | None:
        if self.popen.returncode is None and _exited(self.pid):
            self._reap()
        return self.popen.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit status (-N: killed by signal N); TimeoutExpired after ``timeout``."""
        if self.popen.returncode is not None:
            return self.popen.returncode
        if timeout is None:
            try:
                os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            except ChildProcessError:
                pass
        else:
            deadline, pause = time.monotonic() + timeout, 0.001
            while not _exited(self.pid):
                if time.monotonic() >= deadline:
                    raise TimeoutExpired(self.popen.args, timeout)
                time.sleep(pause)
                pause = min(2 * pause, POLL_S)
        self._reap()
        return self.popen.returncode

    def _reap(self) -> None:
        _killpg(self.pid, signal.SIGKILL)  # what it left in its group; its id is still its own
        self.popen.wait()

    def stop(self, grace: float | None = None) -> None:
        """SIGTERM to the group, ``grace`` seconds, SIGKILL; returns once the child is reaped,
        and an interrupt during the grace only makes it SIGKILL sooner: no child is left for
        ``Popen.__del__`` to find running."""
        if self.popen.returncode is not None:
            return
        try:
            if not _exited(self.pid):
                _killpg(self.pid, signal.SIGTERM)
                grace = self.grace if grace is None else grace
                try:
                    self.wait(grace + (GUARD_SLACK_S if self.guarded else 0.0))
                except TimeoutExpired:
                    pass
        finally:
            self._reap()


def stop_all(children: Sequence[Child], grace: float = GRACE_S) -> None:
    """``Child.stop`` for several at once: SIGTERM to every group first, then one shared
    ``grace`` for all, then SIGKILL to what is left; so stopping N children takes one grace,
    not N (a scheduler's kill window is short)."""
    try:
        running = [c for c in children if c.popen.returncode is None and not _exited(c.pid)]
        for child in running:
            _killpg(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace + (GUARD_SLACK_S if any(c.guarded for c in running) else 0.0)
        pause = 0.001
        while any(not _exited(c.pid) for c in running) and time.monotonic() < deadline:
            time.sleep(pause)
            pause = min(2 * pause, POLL_S)
    finally:  # an interrupt during the grace: SIGKILL now, but reap every one
        for child in children:
            if child.popen.returncode is None:
                child._reap()


def start(cmd: Sequence[str | os.PathLike], *, env: Mapping[str, str], stdin=DEVNULL,
          stdout=None, stderr=None, cwd: str | os.PathLike | None = None,
          grace: float = GRACE_S) -> Child:
    """Start ``cmd`` in its own session (under the guard on Linux); Popen's OSError if it
    can't be executed. Prefer ``started`` or ``run``, which also stop it."""
    return _spawn(cmd, env=env, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, grace=grace).confirm()


def _spawn(cmd: Sequence[str | os.PathLike], *, env: Mapping[str, str], stdin, stdout, stderr,
           cwd: str | os.PathLike | None, grace: float) -> Begun:
    argv = [os.fspath(a) for a in cmd]
    options = dict(stdin=stdin, stdout=stdout, stderr=stderr, env=dict(env), cwd=cwd,
                   start_new_session=True)
    if not _GUARDED or not sys.executable:
        return Begun(subprocess.Popen(argv, **options), grace, None, argv[0])
    status_r, status_w = os.pipe()
    try:
        popen = subprocess.Popen([sys.executable, "-I", "-S", _GUARD, str(os.getpid()),
                                  str(status_w), repr(grace), str(len(_SCRATCH)), *_SCRATCH,
                                  *argv], pass_fds=(status_w,), **options)
    except BaseException:
        os.close(status_r)
        raise
    finally:
        os.close(status_w)
    return Begun(popen, grace, status_r, argv[0])


class Begun:
    """A command started, not yet known to run: on Linux its guard's word (``confirm``) is
    still to be read. ``begin`` gives one for ``run``'s second half, ``finish``."""

    def __init__(self, popen: subprocess.Popen, grace: float, status: int | None, program: str):
        self.popen, self.grace, self.status, self.program = popen, grace, status, program

    def confirm(self) -> Child:
        """The running child; Popen's OSError if the command could not be executed."""
        child = Child(self.popen, self.grace, self.status is not None)
        if self.status is None:
            return child
        try:
            with os.fdopen(self.status, "rb") as status:
                answer = status.read().decode("ascii", "replace")
        except BaseException:
            child.stop()
            raise
        if answer != "ok":
            child.wait()
            errno = int(answer) if answer.isdigit() else 0
            raise OSError(errno, os.strerror(errno) if errno else "the process guard failed", self.program)
        return child

    def finish(self, *, timeout: float, bound: float | None = None,
               progress: Callable[[str], float | None] | None = None) -> Completed:
        """What ``run`` returns, for the command ``begin`` started: its deadline ``timeout``
        seconds from now, the rest as ``run``."""
        _check_limit("timeout", timeout)
        _check_limit("bound", bound)
        out, err = bytearray(), bytearray()
        with signals_interrupt():
            child = self.confirm()
            try:
                limit = _pump(child, out, err, timeout, bound, progress)
                returncode = None if limit is not None else child.wait()
            finally:
                child.stop()
        return Completed(returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                         limit is not None, limit)


def begin(cmd: Sequence[str | os.PathLike], *, env: Mapping[str, str], stdin=DEVNULL,
          cwd: str | os.PathLike | None = None, grace: float = GRACE_S) -> Begun:
    """``run`` in two halves, for a caller with work of its own to do while ``cmd`` runs: here
    ``cmd`` is started with its output piped and nothing is waited for (not even the guard);
    ``Begun.finish`` is the rest. One never finished dies with envcheck (on Linux its guard
    sees to it; elsewhere it runs to its end). Its output should fit a pipe (64 KiB): more
    waits for ``finish``."""
    return _spawn(cmd, env=env, stdin=stdin, stdout=PIPE, stderr=PIPE, cwd=cwd, grace=grace)


@contextmanager
def temporary_directory(prefix: str = "envcheck-") -> Iterator[Path]:
    """A temporary folder for children to work in, removed when the block ends, or, if
    envcheck is killed first (SIGKILL), by the guard of a child started inside the block."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix=prefix) as path:
        _SCRATCH.append(path)
        try:
            from pathlib import Path

            yield Path(path)
        finally:
            _SCRATCH.remove(path)


@contextmanager
def started(cmd: Sequence[str | os.PathLike], **options) -> Iterator[Child]:
    """``start``, with SIGTERM/SIGHUP as interrupts; when the block ends, however it ends,
    the child and everything it started are gone."""
    with signals_interrupt():
        child = start(cmd, **options)
        try:
            yield child
        finally:
            child.stop()


# -- run with a deadline ---------------------------------------------------------------------

class Completed(namedtuple("Completed", "returncode stdout stderr timed_out limit", defaults=(None,))):
    """How ``run`` ended: ``returncode`` None when stopped at its deadline, -N when killed by
    signal N; its output; ``limit``, when timed out: the limit (seconds) that ran out."""

    __slots__ = ()


def _check_limit(name: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number of seconds > 0, not {value!r}")


def run(cmd: Sequence[str | os.PathLike], *, timeout: float, env: Mapping[str, str],
        stdin=DEVNULL, cwd: str | os.PathLike | None = None, bound: float | None = None,
        progress: Callable[[str], float | None] | None = None,
        grace: float = GRACE_S) -> Completed:
    """Run ``cmd`` to its end or its deadline; its output, decoded.

    The deadline is ``timeout`` seconds from the start. ``progress`` is called with each
    line of stderr; a number it returns moves the deadline to that many seconds from now.
    ``bound`` caps the whole run however much progress is reported. At the deadline (or on
    any exception, Ctrl-C, SIGTERM, SIGHUP) the child's whole tree is stopped.
    Raises OSError when ``cmd`` can't be executed.
    """
    _check_limit("timeout", timeout)
    _check_limit("bound", bound)
    with signals_interrupt():
        return begin(cmd, env=env, stdin=stdin, cwd=cwd, grace=grace).finish(timeout=timeout, bound=bound,
                                                                             progress=progress)


def _pump(child: Child, out: bytearray, err: bytearray, timeout: float, bound: float | None,
          progress: Callable[[str], float | None] | None) -> float | None:
    """Read the child's output until it ends; the limit that ran out first, or None."""
    started_at = time.monotonic()
    hard = started_at + bound if bound is not None else math.inf
    limit, deadline = timeout, started_at + timeout
    seen = 0  # bytes of stderr already given to progress
    with selectors.DefaultSelector() as selector:
        selector.register(child.popen.stdout, selectors.EVENT_READ, out)
        selector.register(child.popen.stderr, selectors.EVENT_READ, err)
        while selector.get_map():
            now = time.monotonic()
            if now >= min(deadline, hard):
                return limit if deadline <= hard else bound
            for key, _ in selector.select(min(deadline, hard) - now):
                data = os.read(key.fd, 65536)
                if not data:
                    selector.unregister(key.fileobj)
                    key.fileobj.close()
                    continue
                key.data.extend(data)
                if key.data is err and progress is not None:
                    end = err.rfind(b"\n") + 1
                    for line in bytes(err[seen:end]).decode("utf-8", "replace").splitlines():
                        extended = progress(line)
                        if extended is not None:
                            limit, deadline = extended, time.monotonic() + extended
                    seen = max(seen, end)
    remaining = min(deadline, hard) - time.monotonic()
    try:
        child.wait(max(remaining, 0.0))
    except TimeoutExpired:
        return limit if deadline <= hard else bound
    return None
