"""Was an env's bytecode compiled from its source? Asked of the env's own interpreter.

Python runs ``D/__pycache__/S.TAG.pyc`` (``S.TAG.opt-N.pyc`` under ``-O``) in place of ``D/S.py``
when TAG is its cache tag, the file starts with its magic number and the header's stamp of the
source (modification time and size, or the source's hash) matches; it never reads the rest of
the source. A stamp is easy to forge (``touch -r``, or the hash of the real source over other
code), and one that does not match today can match after a ``touch`` tomorrow, so the one proof
that bytecode is its source's is to compile the source and compare: code objects compare equal
when their instructions, constants, names and line tables do (their file name aside). Bytecode
this interpreter never loads (another cache tag or magic number) is not its to judge.

Run as a script by the env's interpreter (``python -I -S -B bytecode.py LIST``: nothing of the
env's site-packages is imported), so it judges with that Python's compiler and magic number:
standard library only, and syntax every Python 3 envcheck makes envs with reads. LIST is a JSON
file of ``[[pyc, source], ...]``; it prints ``{"tag": ..., "bad": [pyc, ...]}``: each pyc this
interpreter would load that is not compiled from its source's bytes now (or can't be read as
code).
"""
import json
import marshal
import sys
import warnings
from importlib.util import MAGIC_NUMBER

HEADER = 16  # magic, flags, then the source's mtime and size or its hash (PEP 552)


def optimization(name):
    """The ``-O`` level a pyc named ``S.TAG[.opt-N].pyc`` is loaded at, or None when this
    interpreter never loads it by that name."""
    parts = name.split(".")
    if parts[-1] != "pyc" or len(parts) not in (3, 4) or parts[1] != sys.implementation.cache_tag:
        return None
    if len(parts) == 3:
        return 0
    return {"opt-1": 1, "opt-2": 2}.get(parts[2])


def from_source(pyc, source):
    """True: ``pyc`` holds the code of ``source`` compiled; False: this interpreter would load
    it and it does not; None: this interpreter never loads it."""
    level = optimization(pyc.replace("\\", "/").rsplit("/", 1)[-1])
    if level is None:
        return None
    try:
        with open(pyc, "rb") as fh:
            data = fh.read()
    except OSError:  # unreadable or gone: nothing loads it
        return None
    if data[:4] != MAGIC_NUMBER:
        return None
    try:
        with open(source, "rb") as fh:
            code = compile(fh.read(), source, "exec", dont_inherit=True, optimize=level)
        return marshal.loads(data[HEADER:]) == code
    except (OSError, SyntaxError, ValueError, EOFError, TypeError):
        return False  # a source that doesn't compile, or bytecode that isn't code: not its source's


def main(argv):
    with open(argv[1], encoding="utf-8") as fh:
        pairs = json.load(fh)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a source's SyntaxWarnings are not this answer
        bad = [pyc for pyc, source in pairs if from_source(pyc, source) is False]
    sys.stdout.write(json.dumps({"tag": sys.implementation.cache_tag, "bad": bad}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
