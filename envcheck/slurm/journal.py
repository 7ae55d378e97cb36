"""What a Slurm hook tells the system log: slurmd keeps a health check's output only when it
fails, so a degraded finding (which drains nothing) and every drain or resume are written to
syslog (facility daemon, ident ``envcheck``), where an admin's log tooling finds them. Where
there is no system logger (a container without /dev/log) the C library drops the line."""
from __future__ import annotations

from .reasons import one_line

IDENT = "envcheck"


def log(line: str, warning: bool = False) -> None:
    """``line`` to syslog, as one line."""
    try:
        import syslog
    except ImportError:  # not on a Unix: no system log
        return
    syslog.openlog(IDENT, syslog.LOG_PID, syslog.LOG_DAEMON)
    syslog.syslog(syslog.LOG_WARNING if warning else syslog.LOG_INFO, one_line(line)[:1000])
