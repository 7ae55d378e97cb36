"""Use cases: what a user asks envcheck, each a function of a ``Session`` returning a result.

Owns: the session (home, store, the host probed once), which env (``Session.resolve_env``:
a name or ``auto`` through ``select``), validate-and-store (``Session.validate_and_store``),
advice (``hints``), and the commands' flows: select, gate (check, ``ensure_ready``), run,
provision, doctor, compat, validate. Each returns an ``envcheck.results.Result`` carrying its
schema and exit code. Prints nothing.

May import: everything below it (``envs``, ``frameworks``, ``host``, ``validation``,
``processes``, ``results``, ``errors``, ``paths``). Never ``cli``.
"""
