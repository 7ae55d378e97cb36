"""The guard: the small program ``processes.start`` runs each child under, on Linux.

Run by path with envcheck's own interpreter
(``python -I -S _guard.py PARENT FD GRACE N FOLDER1..FOLDERN CMD...``) it starts in about 6 ms, so it imports only ``os``, ``signal``, ``sys`` and ``time`` (the
rest of ``processes`` would cost 25 ms more per child). Why it exists and what it promises:
see ``envcheck.processes``.

Imported, it gives envcheck's own signal handling, here because this module is cheap to import
(the command line's click-free fast path needs it too; ``processes`` re-exports it):

- ``reset_signals``, for a command about to be exec'd;
- ``on_interrupt``, the handler that turns SIGINT into KeyboardInterrupt and SIGTERM/SIGHUP into
  ``Interrupted`` (``processes.signals_interrupt`` installs it);
- for the command line, ``end_at_first_interrupt`` and ``exit_quietly``: the first interrupt is
  raised, every later one does nothing. Python runs a signal handler wherever the main thread
  happens to be, a ``Popen.__del__``, a weakref callback, an ``atexit`` function,
  ``threading._shutdown``; a KeyboardInterrupt raised there can't propagate, so Python prints
  "Exception ignored in ..." with a traceback and drops it. A second Ctrl-C lands in such places
  while the first one's clean-up unwinds, and a storm of them during the shutdown, so once
  envcheck is on its way out, further interrupts must not raise. Its clean-up is bounded (a
  child's grace, then SIGKILL), so nothing waits on a second Ctrl-C; SIGKILL still works, and
  the next command finishes what it cut short (see ``envs.scratch``).

Protocol: the guard writes ``ok``, or the errno of a failed exec, to file descriptor FD and
closes it; it then ends as the command ends (its exit status, or killed by its signal). The
N folders are envcheck's temporary ones: the guard removes them if envcheck dies first.
"""
from __future__ import annotations

import _signal as signal  # what `signal` wraps in enums; its enum import costs the gate 1.5 ms
import os
import sys
import time

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


# -- envcheck's own process: how an interrupt ends it ----------------------------------------

class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP while a child runs: the Ctrl-C path, with the signal's number."""

    def __init__(self, signum: int):
        from signal import Signals  # named only when it happens

        super().__init__(Signals(signum).name)
        self.signum = signum


class Interrupts:
    """What ``on_interrupt`` reads. A class the handler holds as a default argument, not module
    globals: the interpreter empties those during its shutdown, while signals still arrive."""

    once = False  # ``end_at_first_interrupt`` was called: this process is envcheck's command line
    raised = False  # with ``once``: an interrupt was raised, the later ones do nothing
    decided = False  # the command line chose its exit status: no interrupt raises any more


def on_interrupt(signum: int, frame, state=Interrupts) -> None:
    """SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP ``Interrupted``; but nothing once the
    exit status is decided, nor, with ``once``, after the first."""
    if state.decided or state.raised:
        return
    state.raised = state.once
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Interrupted(signum)


def _dropped(unraisable, state=Interrupts) -> None:
    """``sys.unraisablehook`` of the command line. A first interrupt that Python handled inside a
    finalizer (a ``__del__``, a weakref callback) can't propagate from there and is dropped:
    say nothing (not its traceback) and let the next interrupt raise. (It can't be raised again
    from here: this hook is Python code too, so the handler would run inside it.)"""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt) or state.decided:
        sys.__unraisablehook__(unraisable)
        return
    state.raised = False  # the last statement, after every call: no handler runs in between


def end_at_first_interrupt() -> None:
    """For envcheck's command line (main thread): Ctrl-C raises KeyboardInterrupt once; later
    interrupts do nothing (see the module docstring). A SIGINT its parent made ignored stays ignored."""
    Interrupts.once = True
    sys.unraisablehook = _dropped
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_interrupt)


def exit_quietly(code) -> None:
    """End the command line with ``code`` (what ``sys.exit`` takes) whatever signals arrive from
    now on: SIGINT, SIGTERM and SIGHUP are ignored for the shutdown, where one would otherwise
    print a traceback (``threading._shutdown``, ``atexit`` functions, finalizers) or end the
    process by a signal after its status was decided; the output is flushed, and a reader that
    went away (a closed pipe) gets nothing more rather than a traceback."""
    Interrupts.decided = True
    _ignore_stop_signals()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
            except (OSError, ValueError):
                pass
    sys.exit(code)


def _ignore_stop_signals() -> None:
    """SIG_IGN for SIGINT, SIGTERM and SIGHUP, with them blocked meanwhile: a signal that
    arrived before is handled (by ``on_interrupt``, which does nothing now), one that arrives
    after is dropped by the kernel. Setting SIG_IGN while another thread can take the signal
    would race (Python prints "Signal 2 ignored due to race condition"), so with other threads
    alive ``on_interrupt`` stays the handler (doing nothing) and takes SIGTERM and SIGHUP too."""
    threading = sys.modules.get("threading")
    if threading is not None and threading.current_thread() is not threading.main_thread():
        return
    try:
        alone = len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no /proc (macOS): count Python's threads, the only ones envcheck starts
        alone = threading is None or threading.active_count() == 1
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS) if alone else None
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) not in (signal.SIG_IGN, None):
            signal.signal(sig, signal.SIG_IGN if alone else on_interrupt)
    if previous is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def reset_signals() -> None:
    """Default disposition for every signal and an empty mask: call right before exec."""
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass  # a signal number the C library reserves for itself
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


class _Stop(Exception):
    raised = False  # one stop is enough: a signal during it changes nothing

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_stop(signum, frame):
    if not _Stop.raised:
        _Stop.raised = True
        raise _Stop(signum)


def _prctl(option: int, value: int) -> None:
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _children(me: int) -> list[int]:
    try:
        with open(f"/proc/{me}/task/{me}/children") as fh:
            return [int(pid) for pid in fh.read().split()]
    except OSError:  # a kernel without CONFIG_PROC_CHILDREN: read every process's parent
        pass
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rpartition(")")[2].split()[1]) == me:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return found


def _signal_tree(me: int, sig: int) -> None:
    """``sig`` to each child of the guard, and to the group it leads if it leads one."""
    for pid in _children(me):
        for kill in (os.kill, os.killpg):
            try:
                kill(pid, sig)
            except OSError:
                pass


def _sweep(me: int) -> None:
    """SIGKILL every descendant and reap, round after round (each round's victims hand their
    children to the subreaper) until none is left."""
    while True:
        _signal_tree(me, signal.SIGKILL)
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.005)


def _spawn(argv: list[str], status_fd: int) -> int:
    """Fork and exec the command; tell envcheck ``ok`` or the errno of a failed exec."""
    me = os.getpid()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(err_r)
            reset_signals()
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() == me:
                os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(err_w, str(exc.errno or 0).encode())
        finally:
            os._exit(127)
    os.close(err_w)
    with os.fdopen(err_r, "rb") as fh:
        failed = fh.read()
    try:
        os.write(status_fd, failed or b"ok")
    except OSError:  # envcheck stopped listening (interrupted while it waited): its SIGTERM follows
        pass
    os.close(status_fd)
    return pid


def _end_like(status: int) -> None:
    """Exit as the command did: its exit status, or killed by its signal (without a core)."""
    if os.WIFSIGNALED(status):
        import resource

        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sig != signal.SIGKILL:
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def _stop_command(me: int, pid: int, grace: float) -> int | None:
    """SIGTERM to the command's group and to every orphan; its status if it ends in time."""
    _signal_tree(me, signal.SIGTERM)
    os.killpg(os.getpgrp(), signal.SIGTERM)  # the guard itself ignores it by now
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return status
        time.sleep(0.01)
    return None


def _remove(folders: list[str]) -> None:
    import shutil

    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def guard(parent: int, status_fd: int, grace: float, folders: list[str], argv: list[str]) -> None:
    os.set_inheritable(status_fd, False)
    me = os.getpid()
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    for sig in STOP_SIGNALS:
        signal.signal(sig, _raise_stop)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # envcheck died before the kernel was asked
        os._exit(128 + signal.SIGTERM)
    pid = _spawn(argv, status_fd)
    status, stopped = None, None
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        status = os.waitpid(pid, 0)[1]
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # a stop arriving now raises here, not below
    except _Stop as stop:
        stopped = stop.signum
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    if stopped is not None:
        status = _stop_command(me, pid, grace)
    _sweep(me)
    if os.getppid() != parent:  # envcheck is gone: its temporary folders are ours to remove
        _remove(folders)
    if stopped is not None or status is None:
        os._exit(128 + (stopped or signal.SIGTERM))
    _end_like(status)


if __name__ == "__main__":
    count = int(sys.argv[4])
    guard(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[5:5 + count],
          sys.argv[5 + count:])
