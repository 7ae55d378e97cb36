"""Envs: presets, managed virtualenvs and what is installed in them.

Owns: preset files (parsed and validated once), the env home's layout, env names, one lock
per env, transactional create / add / remove (an interruption leaves an env as before or
visibly incomplete with its repair), export and list, the versioned manifest (written
atomically, migrated forward), the installers (uv, pip) behind one interface with the same
index settings, interpreter discovery, and installed packages read from ``*.dist-info``
without starting the env.

May import: ``envcheck.errors``, ``paths``, ``processes``, ``results``, ``frameworks`` (to name
an env's frameworks in its manifest), ``packaging``, ``filelock``. Never NVML, a framework,
``validation``, ``usecases`` or ``cli``.
"""
