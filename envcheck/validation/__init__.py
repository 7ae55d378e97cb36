"""Validation: does an env train on this machine? Checks with evidence and a verdict.

Owns: the checks (host, level-1 health of the GPUs an env uses (``health``), compat,
integrity, libraries, the framework's GPU count, smoke per device, multi-replica, speedup), the smoke runner's isolation (per-device re-runs, deadlines,
process groups), devices as users name them, diagnosis of logs, and stored reports with
their fingerprint. Prints nothing: it returns ``Report`` objects.

May import: ``envcheck.errors``, ``paths``, ``processes`` (and ``child_env``), ``progress``,
``results``, ``data``, ``envs`` (reading), ``frameworks``, ``host``. Never ``usecases`` or ``cli``.
"""

DEFAULT_TIMEOUT = 120.0  # seconds per device, and for starting the framework
