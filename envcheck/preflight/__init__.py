"""Preflight: the fleet compared with itself before a multi-node job (`envcheck fleet preflight`).

Owns: the budget and each phase's share of it (``budget``), the rounds over Ray or Slurm, one
connection for all of them (``rounds``: the fleet's own dispatch, ``fleet.dispatch`` and
``fleet.srun``, with each node's own variables), the nodes' answers read (``reading``), each
figure scored against its model's median and spread across the fleet (``scoring``), the
halving that names the node or pair at fault in a collective (``halving``), the flow of one
preflight (``run``: facts, the env's digests compared, probes in turn per machine, the
collective, the halving, each node's verdict recorded on it) and the ``envcheck.preflight/1``
result with its exclude lists (``result``). The node's side is ``usecases.preflight_node`` and
``preflight_mark``, which every node runs as ``envcheck preflight ...``.

May import: ``errors``, ``results``, ``durations``, ``slurm`` (host lists), ``fleet`` (the
cluster, dispatch, srun, reading a node's answer) and ``usecases.preflight_mark`` (the verdicts
a node keeps). Never a framework (the nodes run envcheck, which runs the env's interpreter) nor
``cli``.
"""
