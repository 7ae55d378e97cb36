"""Fleet: envcheck on every node of a Ray cluster or of Slurm's nodes, one aggregated answer.

Owns: the cluster's address and what answers there, checked before Ray is given it
(``address``), the cluster as envcheck sees it (``cluster``: connect, the alive nodes, ``--nodes``),
the task Ray runs on each node (``tasks``: the node's own ``envcheck COMMAND --json`` as a
subprocess), sending one task per node and collecting the answers within the deadline
(``dispatch``), reading each node's answer from its document's result envelope alone
(``reading``; the node's host facts and level-1 health are the envelope's ``node``:
``tasks.host_of``, ``health``), and the ``envcheck.fleet/1`` result with its summary
(``aggregate``); ``survey`` is the use case the CLI calls. The Slurm engine (``srun``) chooses
Slurm's nodes and runs one srun step on them in place of Ray's cluster and dispatch; its
outcomes are read and aggregated the same way.

Ray is imported lazily, inside this package only (``cluster.import_ray`` first, which says how
to install it when it is missing; ``dispatch`` once connected), and nowhere else in envcheck:
without it every other command works as before.

May import: ``envcheck.errors``, ``processes``, ``results``, ``slurm`` (Slurm's commands and
names) and Ray. Never a framework (the nodes run envcheck as a subprocess), ``usecases`` or ``cli``.
"""
