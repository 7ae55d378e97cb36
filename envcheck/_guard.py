"""The guard: the small program ``processes.start`` runs each child under, on Linux.

Run by path with envcheck's own interpreter
(``python -I -S _guard.py PARENT FD GRACE N FOLDER1..FOLDERN CMD...``) it starts in about 6 ms, so it imports only ``os``, ``signal``, ``sys`` and ``time`` (the
rest of ``processes`` would cost 25 ms more per child). Why it exists and what it promises:
see ``envcheck.processes``. Imported, it gives ``reset_signals``.

Protocol: the guard writes ``ok``, or the errno of a failed exec, to file descriptor FD and
closes it; it then ends as the command ends (its exit status, or killed by its signal). The
N folders are envcheck's temporary ones: the guard removes them if envcheck dies first.
"""
from __future__ import annotations

import os
import signal
import sys
import time

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


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
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_stop(signum, frame):
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
    os.write(status_fd, failed or b"ok")
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
