"""Envs: presets, managed virtualenvs and what is installed in them.

Owns: preset files (parsed and validated once), the env home's layout, env names, one lock
per env, transactional create / add / remove (an interruption leaves an env as before or
visibly incomplete with its repair), export and list, the versioned manifest (written
atomically, migrated forward), the installers (uv, pip) behind one interface with the same
index settings, interpreter discovery, and installed packages read from ``*.dist-info``
without starting the env; the Jupyter kernelspecs envcheck writes for envs (``kernelspec``);
the installers' caches, measured and emptied under the install locks (``caches``); the
installer's output read as progress (``install_output``).

May import: ``envcheck.errors``, ``paths``, ``processes``, ``progress``, ``results``, ``frameworks`` (to name
an env's frameworks in its manifest), ``packaging``, ``filelock``, ``jupyter_core`` (Jupyter's folders). Never NVML, a framework,
``validation``, ``usecases`` or ``cli``.
"""
