"""Slurm: envcheck as the check a Slurm admin drops in, and the nodes a fleet reaches by srun.

Owns: node names and host lists (``names``), Slurm's commands run bounded, argv only
(``client``: ``scontrol show node``, ``sinfo``, ``scontrol update``), drain reasons with
envcheck's prefix and the drain/resume policy (``reasons``: a node drained by anyone else is
never touched), level-1 health read within a budget and turned into problems (``reading``),
gres.conf and ``Gres=`` read as Slurm reads them (``gresconf``) and compared with what NVML
sees, with the gres.conf lines that match it (``gres``), the per-job snapshot the prolog keeps
for the epilog (``snapshot``), and what a hook tells the system log (``journal``). The use
cases that call these are ``usecases.slurm_health``, ``slurm_jobs`` and ``slurm_gres``; the
fleet's Slurm engine is ``fleet.srun``.

May import: ``envcheck.errors``, ``atomic``, ``paths``, ``processes``, ``durations``, ``host``
(level-1 health, the Xid table). Never ``validation``, ``usecases``, ``fleet`` or ``cli``.
"""
