"""The host: what this machine's NVIDIA driver and GPUs are, and whether a build fits them.

Owns: NVML facts (``probe``: each failure a typed, explained state, N/A for unreadable
fields), level-1 health (``level1``: reads only, each finding a verdict effect, a cause and
an action) and compat verdicts (``compat``: pure functions of the published tables, a build
and a host profile, live or what-if). Reads, never writes: NVML, and for level 1 the NVIDIA
device nodes and the kernel log.

May import: ``envcheck.errors``, ``results``, ``data``, ``child_env`` (the GPU order envcheck
sets), ``frameworks``, ``pynvml`` (inside ``probe()`` only). Never ``envs``, ``validation``,
``usecases`` or ``cli``.
"""
