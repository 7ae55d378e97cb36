"""What the enumeration extractors share: reading a C enum (names, values, doc comments) out of
a header, asking a vendor library for its own message strings through ctypes, and writing the
``envcheck.enumeration/1`` JSON document.

Standard library only. Nothing here downloads anything: each extractor is given the header,
library or page that was fetched by hand (README.md in envcheck/data/enumerations/ says which
and from where) and prints the JSON on stdout.
"""
from __future__ import annotations

import ctypes
import json
import re
import subprocess
import sys
from pathlib import Path

SCHEMA = "envcheck.enumeration/1"

_TOKEN = re.compile(r"/\*.*?\*/|//[^\n]*|\n|[^/\n]+|/", re.S)
_INT = re.compile(r"^\(?\s*(-?\s*(?:0[xX][0-9a-fA-F]+|\d+))[uUlL]*\s*\)?$")


def read(path: str | Path) -> str:
    return Path(path).read_text(encoding="utf-8", errors="replace")


def git_show(repo: str, rev: str, path: str, missing_ok: bool = False) -> str | None:
    """``path`` as it is at ``rev`` in the git checkout ``repo`` (None if absent and ``missing_ok``)."""
    done = subprocess.run(["git", "-C", repo, "show", f"{rev}:{path}"], capture_output=True, text=True,
                          check=not missing_ok)
    return done.stdout if done.returncode == 0 else None


def enum_body(text: str, name: str) -> str:
    """The text between the braces of ``typedef enum [tag] { ... } name;`` or ``enum [macro] name
    { ... }``, whichever the header uses."""
    patterns = [
        r"typedef\s+enum(?:\s+\w+){0,3}\s*\{(?P<body>[^{}]*)\}\s*" + re.escape(name) + r"\s*;",
        r"\benum\s+(?:\w+\s+){0,3}" + re.escape(name) + r"\s*\{(?P<body>[^{}]*)\}",
    ]
    for pattern in patterns:
        match = re.search(pattern, text)
        if match:
            return match.group("body")
    raise SystemExit(f"no enum {name!r} found")


def clean_comment(raw: str) -> str:
    """Comment text without its markers, Doxygen commands and line breaks."""
    text = raw
    if text.startswith("/*"):
        text = text[2:-2]
    elif text.startswith("//"):
        text = text[2:]
    text = re.sub(r"^[*!/]*<?", "", text.strip())
    lines = [re.sub(r"^\s*\*+ ?", "", line) for line in text.splitlines()]
    text = " ".join(line.strip() for line in lines)
    text = re.sub(r"\\(?:deprecated|brief|note)\b", "", text)
    text = re.sub(r"@(?:deprecated|brief)\b", "", text)
    text = re.sub(r"\\ref\s+::(\w+)\s+\"([^\"]*)\"", r"\2", text)
    text = re.sub(r"\\(?:ref|p|c|link|endlink)\s+", "", text)
    text = text.replace("::", "")
    return re.sub(r"\s+", " ", text).strip()


def _is_doxygen(raw: str) -> bool:
    return raw.startswith(("/**", "/*!", "///", "//!"))


def parse_enum(body: str) -> list[dict]:
    """Each enumerator in order: name, value (int), alias_of (name or None), doc (cleaned comment
    text, Doxygen comments preferred), deprecated (bool)."""
    body = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))
    entries: list[dict] = []
    pending: list[str] = []          # comments seen before the next enumerator starts
    current: dict | None = None      # enumerator whose comma has not come yet
    last: dict | None = None         # enumerator whose comma came last
    last_line_open = False           # still on the line where ``last`` ended
    code = ""

    def start_or_extend(fragment: str) -> None:
        nonlocal current, code
        if current is None and fragment.strip():
            current = {"leading": list(pending), "trailing": []}
            pending.clear()
            code = ""
        if current is not None:
            code += fragment

    def finish() -> None:
        nonlocal current, last, code, last_line_open
        if current is None:
            return
        current["code"] = code.strip()
        entries.append(current)
        last, current, code = current, None, ""
        last_line_open = True

    floating: list[str] = []         # comments on their own lines while an enumerator is open
    code_on_line = False             # the open enumerator has code on the current line
    for token in _TOKEN.findall(body):
        if token == "\n":
            last_line_open = False
            code_on_line = False
            if current is not None:
                code += " "
            continue
        if token.startswith(("/*", "//")):
            trailing_marker = token.startswith(("/**<", "///<", "//!<", "/*!<"))
            if current is not None:
                if code_on_line or trailing_marker:
                    current["trailing"].append(token)
                else:
                    floating.append(token)
            elif last is not None and (trailing_marker or last_line_open):
                last["trailing"].append(token)
            else:
                pending.append(token)
            continue
        if not token.strip():
            continue
        parts = token.split(",")
        if current is not None and floating:
            if not parts[0].strip() and len(parts) > 1:
                # ``, NEXT = ...`` style: the comments above the comma belong to NEXT
                finish()
                pending.extend(floating)
                parts = parts[1:]
            else:
                current["trailing"].extend(floating)
            floating.clear()
        for index, part in enumerate(parts):
            start_or_extend(part)
            if part.strip():
                code_on_line = True
            if index < len(parts) - 1:
                finish()
                code_on_line = False
    finish()

    values: dict[str, int] = {}
    result = []
    previous = -1
    for entry in entries:
        match = re.match(r"^(\w+)(?:\s+\w+)*\s*(?:=\s*(.+))?$", entry["code"], re.S)
        if not match:
            raise SystemExit(f"cannot read enumerator {entry['code']!r}")
        name, expr = match.group(1), (match.group(2) or "").strip()
        alias_of = None
        if not expr:
            value = previous + 1
        elif _INT.match(expr):
            value = int(_INT.match(expr).group(1).replace(" ", ""), 0)
        elif expr in values:
            value, alias_of = values[expr], expr
        else:
            substituted = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: str(values[m.group(0)]) if m.group(0) in values else m.group(0), expr)
            substituted = re.sub(r"(0[xX][0-9a-fA-F]+|\d+)[uUlL]+", r"\1", substituted)
            if not re.fullmatch(r"[\d\sxXa-fA-F()+\-<|*]+", substituted):
                raise SystemExit(f"cannot evaluate {name} = {expr!r}")
            value = int(eval(substituted, {"__builtins__": {}}))  # digits and operators only
        values[name] = value
        previous = value
        comments = entry["leading"] + entry["trailing"]
        doxy = [c for c in comments if _is_doxygen(c)]
        chosen = doxy or comments
        raw = " ".join(chosen)
        doc = " ".join(clean_comment(c) for c in chosen).strip() or None
        attributes = entry["code"][len(name):].split("=")[0]
        deprecated = bool(re.search(r"[\\@]deprecated|\bDeprecated:|deprecated as of|//\s*Deprecated\b",
                                    " ".join(comments))
                          or "DEPRECATED" in attributes)
        result.append({"name": name, "value": value, "alias_of": alias_of, "doc": doc,
                       "deprecated": deprecated})
    return result


def sentences(text: str | None, count: int = 2) -> str | None:
    """The first ``count`` sentences of a doc text (a period followed by a space and a capital,
    or the end, closes one)."""
    if not text:
        return None
    parts = re.split(r"(?<!\s[a-zA-Z]\.)(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s+(?=[A-Z(])", text.strip())
    return " ".join(parts[:count]).strip() or None


_ESCAPES = {"n": "\n", "t": "\t", "\"": "\"", "\\": "\\", "'": "'", "r": "\r", "0": "\0"}


def c_unescape(literal: str) -> str:
    """The text of a C string literal's body (simple escapes; others kept as written)."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), literal)


def c_string_fn(library: ctypes.CDLL, symbol: str, argtype=ctypes.c_int):
    """A ``const char *f(int)`` of the library, or None when it has no such symbol."""
    try:
        fn = getattr(library, symbol)
    except AttributeError:
        return None
    fn.restype = ctypes.c_char_p
    fn.argtypes = [argtype]
    return lambda value: (fn(value) or b"").decode("utf-8", "replace")


def load(path: str | Path, mode: int = ctypes.RTLD_GLOBAL) -> ctypes.CDLL:
    return ctypes.CDLL(str(path), mode=mode)


def document(name: str, source: dict, entries: list[dict], **extra) -> dict:
    doc = {"schema": SCHEMA, "name": name, "source": source}
    doc.update(extra)
    doc["entries"] = entries
    return doc


def check_unique(doc: dict) -> None:
    """Names are unique; a number repeats only where an entry says whose alias it is."""
    names: set[str] = set()
    numbers: dict[int, str] = {}
    for entry in doc["entries"]:
        if entry["name"] in names:
            raise SystemExit(f"{doc['name']}: name {entry['name']} twice")
        names.add(entry["name"])
        number = entry.get("number")
        if number is None:
            continue
        if number in numbers and not entry.get("alias_of"):
            raise SystemExit(f"{doc['name']}: number {number} for {numbers[number]} and {entry['name']} "
                             "(neither marked alias_of)")
        numbers.setdefault(number, entry["name"])


def emit(doc: dict) -> None:
    check_unique(doc)
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")
