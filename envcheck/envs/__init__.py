"""Envs: presets, managed virtualenvs and what is installed in them.

Owns: preset files (parsed and validated once), the env home's layout, env names, one lock
per env, transactional create / add / remove (an interruption leaves an env as before or
visibly incomplete with its repair), export and list, the versioned manifest (written
atomically, migrated forward), the installers (uv, pip) behind one interface with the same
index settings, interpreter discovery, and installed packages read from ``*.dist-info``
without starting the env; the Jupyter kernelspecs envcheck writes for envs (``kernelspec``);
the installers' caches, measured and emptied under the install locks (``caches``); the
installer's output read as progress (``install_output``); the home's shared folders under
commands running at once (``shared``).

May import: ``envcheck.errors``, ``atomic``, ``paths``, ``processes`` (and ``child_env``),
``progress``, ``results``, ``distributions``, ``durations`` (``ENVCHECK_INDEX_TIMEOUT``), ``packaging``, ``jupyter_core``
(Jupyter's folders). Never NVML, a framework, ``frameworks``, ``validation``, ``usecases`` or
``cli``: the manifest's ``frameworks`` field is named by a function the caller hands the store
(``EnvStore(frameworks_of=...)``; the use cases pass ``frameworks.detect``), and names are
compared by ``envcheck.distributions``, which both packages use, so neither imports the other.
"""
