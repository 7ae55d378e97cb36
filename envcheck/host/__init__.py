"""The host: what this machine's NVIDIA driver and GPUs are, and whether a build fits them.

Owns: NVML facts (``probe``: each failure a typed, explained state, N/A for unreadable
fields) and compat verdicts (``compat``: pure functions of the published tables, a build
and a host profile, live or what-if). Touches no disk beyond loading NVML.

May import: ``envcheck.errors``, ``results``, ``data``, ``frameworks``, ``pynvml`` (inside
``probe()`` only). Never ``envs``, ``validation``, ``usecases`` or ``cli``.
"""
