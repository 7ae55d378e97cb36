"""envcheck's version, said once: the package's ``__version__``, the wheel's metadata (hatch reads
it here, pyproject.toml's ``[tool.hatch.version]``) and what a node's envcheck tells a fleet over
srun (``cli.run``) are this string. Imports nothing."""
__version__ = "0.1.0"
