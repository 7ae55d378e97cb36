"""Use cases: what a user asks envcheck, each a function of a ``Session`` returning a result.

Owns: the session (home, store, the host probed once), which env (``Session.resolve_env``:
a name or ``auto`` through ``select``), validate-and-store (``Session.validate_and_store``),
advice (``hints``), and the commands' flows: select, gate (check, ``ensure_ready``), run
(``launch``, and ``ranks`` for a distributed-launcher-style job), provision, doctor, compat, validate,
the stored reports (``report``), Jupyter kernels, the cache, the Markdown bug report
(``bugreport``). Each returns an ``envcheck.results.Result`` carrying its
schema and exit code. Prints nothing.

May import: everything below it (``envs``, ``frameworks``, ``host``, ``validation``,
``processes``, ``child_env``, ``progress``, ``results``, ``errors``, ``paths``, ``distributions``, ``durations``).
Never ``cli``, nor ``fleet``, which stands beside it (``tests/test_layout.py``'s ``LAYERS``).
"""
