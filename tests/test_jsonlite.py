"""cli/jsonlite.py writes what ``json.dumps(obj, indent=2, default=str)`` writes and reads what
``json.loads`` reads (the gate's fast path uses it in place of ``json``)."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.cli import jsonlite

DOCS = [
    {}, [], "", 0, -1, 2**70, 1.5, -0.0, 1e300, 1e-300, True, False, None, "é ☃ \U0001f600",
    "\x00\x1f\x7f\"\\/\b\f\n\r\t", "\ud800 lone \udcff surrogates",
    {"a": [1, 2.25, {"b": None, "c": [], "d": {}}], "e": (1, "two"), 3: "int key",
     2.5: "float key", True: "bool key", None: "none key"},
    [[[]], [{}], [[1]], {"x": {"y": {"z": [True, False]}}}],
    {"path": Path("/tmp/x"), "nested": [Path("a"), {"p": Path("b")}]},
]


@pytest.mark.parametrize("doc", DOCS, ids=range(len(DOCS)))
def test_dumps_is_json_dumps_with_indent_2_default_str(doc):
    assert jsonlite.dumps(doc) == json.dumps(doc, indent=2, default=str)


def test_dumps_the_gate_answer_and_nonfinite_floats_as_json_does():
    assert jsonlite.dumps([math.nan, math.inf, -math.inf]) == json.dumps([math.nan, math.inf, -math.inf], indent=2)
    here = Path(__file__).parent
    for path in sorted(here.rglob("*.json"))[:40]:  # whatever documents the tests keep
        data = json.loads(path.read_text(encoding="utf-8"))
        assert jsonlite.dumps(data) == json.dumps(data, indent=2, default=str), path


def test_dumps_refuses_what_json_refuses():
    with pytest.raises(TypeError, match="keys must be str"):
        jsonlite.dumps({(1, 2): 3})
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        jsonlite.dumps(loop)


@pytest.mark.parametrize("doc", DOCS[:-1], ids=range(len(DOCS) - 1))
def test_loads_reads_what_json_writes(doc):
    for text in (json.dumps(doc), json.dumps(doc, indent=2), f" \n{json.dumps(doc)}\t\r\n"):
        assert jsonlite.loads(text) == json.loads(text) or (text == text and doc != doc)


@pytest.mark.parametrize("text", ["", " ", "{", "{bad", '{"a": 1', '{"a": 1} x', "[1,]", "nul", "01",
                                  '"\x01"'])
def test_loads_refuses_what_json_refuses_with_a_value_error(text):
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        jsonlite.loads(text)


def test_loads_answers_a_value_error_where_json_recurses_too_deep():
    with pytest.raises(ValueError):
        jsonlite.loads("[" * 100_000)


def test_importing_it_imports_neither_json_nor_re():
    # -S: no site, so no .pth file of this interpreter's site-packages (a CA-injecting one imports
    # certifi, hence re) stands in for what the module itself imports; the repository goes on the
    # path by hand.
    root = Path(__file__).parent.parent
    code = (f"import sys; sys.path.insert(0, {str(root)!r}); before = {{'json', 're'}} & set(sys.modules); "
            "import envcheck.cli.jsonlite; print(sorted(before), 'json' in sys.modules, 're' in sys.modules)")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True,
                         cwd=root).stdout
    assert out.split() == ["[]", "False", "False"], out
