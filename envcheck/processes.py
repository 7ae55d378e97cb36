"""How envcheck starts child processes: installers, interpreter and library probes, the smoke
runner, and the command of ``envcheck run``. Nothing else in envcheck calls ``subprocess``.

Every child gets:

- a known environment: ``clean_environ`` drops ``STRIPPED`` (what would make an interpreter
  load foreign code or an installer act on another env): what installers and interpreter
  probes get. Anything started in an env, or for one, gets ``child_environ(env, gpus=…,
  framework=…, purpose=…)``, the one place that decides what is added, by purpose:

  ========  =========================================================================
  purpose   what is added to the clean base (``base``, default ``os.environ``)
  ========  =========================================================================
  run       the env (``VIRTUAL_ENV``, its bin folder first on ``PATH``, its CUDA wheels'
            library folders first on ``LD_LIBRARY_PATH``); ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
            (GPUs numbered as NVML numbers them); ``CUDA_VISIBLE_DEVICES`` from ``gpus``
            (None: left as the caller has it); the framework's run variables (the
            registry's ``run_environ``) unless the caller set them
  kernel    the same, as a Jupyter kernelspec's ``env``: only what differs from the
            server's environment (``${PATH}``, ``${LD_LIBRARY_PATH}`` refer to it), and the
            stripped ``PYTHON*`` variables set empty, which Python reads as unset
  smoke     the env (when there is one), the GPU order, ``PYTHONNOUSERSITE=1``,
            ``PYTHONUNBUFFERED=1`` and every framework's smoke variables as defaults
            (``smoke_environ``: a framework's C++ logs kept off the runner's stderr)
  probe     the env (when there is one): a library loads as it will for the framework
  fleet     nothing: a node's envcheck gets the node's environment, cleaned
  ========  =========================================================================

  ``extra`` is laid over ``base`` first (a caller's own variables: a framework's scratch folder, batch
  sizes, a fleet's forwarded secrets), so it counts as set by the caller;
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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

from ._guard import Interrupted, Interrupts, end_at_first_interrupt, exit_quietly, on_interrupt, reset_signals

__all__ = ["PCI_ORDER", "PURPOSES", "STRIPPED", "Child", "Completed", "Interrupted", "child_environ",
           "clean_environ", "end_at_first_interrupt", "env_environ", "exit_quietly", "venv_of",
           "wheel_library_dirs", "reset_signals", "run", "signals_interrupt", "start", "started",
           "stop_all", "temporary_directory"]

STRIPPED = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT",
            "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")
PCI_ORDER = "PCI_BUS_ID"  # the CUDA_DEVICE_ORDER envcheck sets: CUDA numbers GPUs as NVML does
PURPOSES = ("run", "kernel", "smoke", "probe", "fleet")  # see child_environ
_GPU_PURPOSES = ("run", "kernel", "smoke")  # those that get the GPU order (and may be given GPUs)
_KERNEL_SERVER = {"PATH": "${PATH}", "LD_LIBRARY_PATH": "${LD_LIBRARY_PATH}"}  # Jupyter expands them
GRACE_S = 2.0  # from SIGTERM to SIGKILL
GUARD_SLACK_S = 2.0  # what the guard may take beyond the grace to kill and reap its tree
POLL_S = 0.02
DEVNULL, PIPE, STDOUT = subprocess.DEVNULL, subprocess.PIPE, subprocess.STDOUT
TimeoutExpired = subprocess.TimeoutExpired
_GUARDED = sys.platform.startswith("linux")
_GUARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_guard.py")
_SCRATCH: list[str] = []  # open temporary_directory folders, for the guards to remove


# -- the environment -------------------------------------------------------------------------

def clean_environ(extra: Mapping[str, str] | None = None,
                  base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) with ``extra`` laid over, without ``STRIPPED``."""
    env = dict(os.environ if base is None else base)
    env.update(extra or {})
    for name in STRIPPED:
        env.pop(name, None)
    return env


def env_environ(env_dir: Path | str, base: Mapping[str, str] | None = None,
                extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """For a command run in the env ``env_dir``: clean, ``VIRTUAL_ENV`` and its bin first on
    PATH, and the library folders of its CUDA wheels first on ``LD_LIBRARY_PATH``."""
    env = clean_environ(extra, base)
    bin_dir = Path(env_dir) / ("Scripts" if os.name == "nt" else "bin")
    env["VIRTUAL_ENV"] = str(env_dir)
    env["PATH"] = os.pathsep.join(p for p in (str(bin_dir), env.get("PATH", "")) if p)
    libraries = wheel_library_dirs(env_dir)
    if libraries:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libraries + [p for p in env.get(
            "LD_LIBRARY_PATH", "").split(os.pathsep) if p and p not in libraries])
    return env


def child_environ(env: Path | str | None = None, *, gpus: Sequence[int] | None = None,
                  framework: str | None = None, purpose: str = "run",
                  base: Mapping[str, str] | None = None,
                  extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child started in the env folder ``env`` (None: in no env) for
    ``purpose`` (see the module docstring): ``gpus``, NVML indices to show (None: leave
    ``CUDA_VISIBLE_DEVICES`` as it is); ``framework``, the env's framework as the registry
    names it, with its installed version when known (``"NAME==2.4.0+cu118"``, ``"NAME"``);
    ``base``, the caller's environment (default ``os.environ``; for a kernel, the Jupyter
    server's, referred to by ``${NAME}``); ``extra``, laid over ``base``."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}: one of {', '.join(PURPOSES)}")
    if gpus is not None and purpose not in _GPU_PURPOSES:
        raise ValueError(f"a {purpose} child is given no GPUs")
    if base is None:
        base = _KERNEL_SERVER if purpose == "kernel" else os.environ
    given = {**base, **(extra or {})}  # what the caller set: the framework's defaults yield to it
    environ = env_environ(env, base, extra) if env is not None else clean_environ(extra, base)
    if purpose == "kernel":
        environ = {name: value for name, value in environ.items() if base.get(name) != value}
        environ.update({name: "" for name in STRIPPED if name.startswith("PYTHON")})
    if purpose in _GPU_PURPOSES:
        environ["CUDA_DEVICE_ORDER"] = PCI_ORDER
        if gpus is not None:
            environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))
    if purpose in ("run", "kernel") and framework:
        for name, value in _framework_variables(framework).items():
            if name not in given:
                environ[name] = value
    if purpose == "smoke":
        environ["PYTHONNOUSERSITE"] = "1"
        environ["PYTHONUNBUFFERED"] = "1"
        for name, value in _smoke_variables().items():
            environ.setdefault(name, value)
    return environ


def _framework_variables(framework: str) -> dict[str, str]:
    """The registry's run variables of ``framework`` ("name" or "name==version")."""
    from packaging.version import InvalidVersion, Version

    from . import frameworks  # here, not at the top: frameworks imports envs, which imports this

    name, _, version = framework.partition("==")
    try:
        parsed = Version(version) if version else None
    except InvalidVersion:
        parsed = None
    return dict(frameworks.get(name).run_environ(parsed))


def _smoke_variables() -> dict[str, str]:
    """Every framework's smoke variables: the runner's backend may import any of them (a
    library of one framework in an env of another, say), and reads their stderr."""
    from . import frameworks

    variables: dict[str, str] = {}
    for framework in frameworks.registry().values():
        for name, value in framework.smoke_environ.items():
            variables.setdefault(name, value)
    return variables


def venv_of(python: Path | str) -> Path | None:
    """The virtualenv whose interpreter ``python`` (``ENV/bin/python``) is; None when it is
    none's (a system or a bare interpreter)."""
    prefix = Path(python).parent.parent
    return prefix if (prefix / "pyvenv.cfg").is_file() else None


def wheel_library_dirs(env_dir: Path | str) -> list[str]:
    """The ``lib`` folders of the NVIDIA wheels (``nvidia-*-cu11``/``-cu12``) installed in a
    virtualenv: ``site-packages/nvidia/<component>/lib``, sorted. Recent framework releases
    find them by themselves; older ones only through the loader's path."""
    if os.name == "nt":
        return []
    return sorted(str(p) for p in Path(env_dir).glob("lib/python3*/site-packages/nvidia/*/lib")
                  if p.is_dir())


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
    argv = [os.fspath(a) for a in cmd]
    options = dict(stdin=stdin, stdout=stdout, stderr=stderr, env=dict(env), cwd=cwd,
                   start_new_session=True)
    if not _GUARDED or not sys.executable:
        return Child(subprocess.Popen(argv, **options), grace, False)
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
    child = Child(popen, grace, True)
    try:
        with os.fdopen(status_r, "rb") as status:
            answer = status.read().decode("ascii", "replace")
    except BaseException:
        child.stop()
        raise
    if answer != "ok":
        child.wait()
        errno = int(answer) if answer.isdigit() else 0
        raise OSError(errno, os.strerror(errno) if errno else "the process guard failed", argv[0])
    return child


@contextmanager
def temporary_directory(prefix: str = "envcheck-") -> Iterator[Path]:
    """A temporary folder for children to work in, removed when the block ends, or, if
    envcheck is killed first (SIGKILL), by the guard of a child started inside the block."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix=prefix) as path:
        _SCRATCH.append(path)
        try:
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

@dataclass(frozen=True)
class Completed:
    returncode: int | None  # None: stopped at its deadline; -N: killed by signal N
    stdout: str
    stderr: str
    timed_out: bool
    limit: float | None = None  # when timed out: the limit (seconds) that ran out


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
    out, err = bytearray(), bytearray()
    with started(cmd, env=env, stdin=stdin, stdout=PIPE, stderr=PIPE, cwd=cwd,
                 grace=grace) as child:
        limit = _pump(child, out, err, timeout, bound, progress)
        returncode = None if limit is not None else child.wait()
    return Completed(returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                     limit is not None, limit)


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
