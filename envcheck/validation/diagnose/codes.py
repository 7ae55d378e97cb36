"""The GPU stack's published error codes as diagnose's tables, generated from the enumerations.

``envcheck/data/enumerations/*.json`` hold every code of each enumeration (name, number, the
library's own message, the header's description), the Xid catalogue, NCCL's WARN formats and
the host's and the platform's standard wordings; ``envcheck/data/diagnose_codes.json`` says
which cause each code is. From the two this module makes:

- a ``Code`` per failure code (success and in-progress codes aside), each tied to the id of the
  catalogue entry that is its cause: a hand-written entry of ``catalogue.json`` where the code is
  listed there (``causes``), else an entry generated for the code itself, whose cause and fix
  are its category's (``categories``) with the code's documented meaning;
- the ways a line names a code: by name, by message (or another wording of the same code), by
  number inside a wrapper (``contexts``), or by format (WARN lines, host and platform messages).

Numbers are looked up last: a name or a message on the line decides first, since numbers
changed between releases (CUDA 10.1 renumbered ``cudaError_t``; cuDNN 9 ``cudnnStatus_t``).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

SKIPPED = ("success", "in_progress", "not_a_result")  # the codes that are no failure
FORMAT_SPEC = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t|PRI\w+)?[diouxXeEfgGcsp%]|<[A-Z_]+>")
MIN_LITERAL = 12  # the shortest literal a format is searched by; shorter ones need a context
MIN_CONTEXT_LITERAL = 4  # a format with less literal text than this is not recognised at all


@dataclass(frozen=True)
class Code:
    """One failure code of one enumeration (or one standard wording), and its cause's entry id."""

    enumeration: str
    name: str
    number: int | None
    message: str | None
    meaning: str | None
    entry: str

    def describe(self) -> dict[str, Any]:
        """What a finding says it recognised."""
        return {"enumeration": self.enumeration, "name": self.name, "number": self.number,
                "message": self.message, "meaning": self.meaning}


@dataclass(frozen=True)
class Format:
    """A printf-style wording (a WARN line, a host or platform message): ``pattern`` is its first
    line as a bounded regular expression, ``key`` its longest literal (lower case; empty when
    too short to search for: then only ``context`` finds it), ``literal`` the longest word of it
    (a line without it is not tried)."""

    code: Code
    pattern: str
    key: str
    literal: str
    context: str | None = None
    requires: str | None = None


@dataclass
class Tables:
    """Every code, the generated entries, and the ways a line names a code."""

    codes: list[Code] = field(default_factory=list)
    generated: dict[str, dict[str, Any]] = field(default_factory=dict)
    names: dict[str, Code] = field(default_factory=dict)  # lower-case name -> code
    messages: dict[str, dict[str, Code]] = field(default_factory=dict)  # enumeration -> lower message -> code
    numbers: dict[str, dict[str, dict[int, Code]]] = field(default_factory=dict)  # enum -> new/old -> n -> code
    phrases: dict[str, Code] = field(default_factory=dict)  # messages distinctive enough alone
    mirrored: dict[str, Code] = field(default_factory=dict)  # the same, where HIP copies CUDA's message
    described: dict[str, set[Code]] = field(default_factory=dict)  # a code's documented first sentence
    xids: dict[int, Code] = field(default_factory=dict)
    formats: list[Format] = field(default_factory=list)
    spec: dict[str, Any] = field(default_factory=dict)


def _read(*parts: str) -> Any:
    return json.loads(resources.files("envcheck").joinpath("data", *parts).read_text("utf-8"))


@lru_cache(maxsize=1)
def tables() -> Tables:
    """The tables, read once."""
    spec = _read("diagnose_codes.json")
    built = Tables(spec=spec)
    for enum in spec["enumerations"]:
        _enumeration(built, enum, _read("enumerations", enum["file"]))
    _distinctive(built, spec)
    _xids(built, spec, _read("enumerations", "xid.json"))
    _nccl_warns(built, spec, _read("enumerations", "nccl_warn.json"))
    for name in ("host_messages.json", "platform_messages.json"):
        _messages(built, spec, name, _read("enumerations", name))
    return built


def kebab(name: str, strip: str) -> str:
    """``cudaErrorLaunchOutOfResources`` or ``CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`` less ``strip``,
    in kebab case: ``launch-out-of-resources``."""
    rest = name[len(strip):] if name.startswith(strip) else name
    words = rest.split("_") if "_" in rest or rest.isupper() else re.findall(
        r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z]+", rest)
    return "-".join(w.lower() for w in words if w)


def _cause_of(spec: dict[str, Any], name: str) -> str | None:
    for entry_id, names in spec["causes"].items():
        if name in names:
            return entry_id
    for prefix, entry_id in spec["cause_prefixes"].items():
        if name.startswith(prefix):
            return entry_id
    return None


def _category(enum: dict[str, Any], name: str) -> str:
    for category, rule in enum.get("rules", ()):
        if re.search(rule, name):
            return category
    return enum["default"]


def _enumeration(built: Tables, enum: dict[str, Any], data: dict[str, Any]) -> None:
    title = data["name"]
    messages = built.messages.setdefault(title, {})
    numbers = built.numbers.setdefault(title, {"new": {}, "old": {}})
    wordings = enum.get("wordings", {})
    for item in data["entries"]:
        if any(item.get(flag) for flag in SKIPPED):
            continue
        name, meaning = item["name"], item.get("description") or item.get("message")
        entry_id = _cause_of(built.spec, name) or _cause_of(built.spec, item.get("alias_of") or "")
        if entry_id is None:
            entry_id = f"{enum['prefix']}-{kebab(name, enum['strip'])}"
            if entry_id not in built.generated:
                built.generated[entry_id] = _generated(built.spec, enum, item, entry_id)
        message = item.get("message") if item.get("message") != name else None
        code = Code(title, name, item.get("number"), message, meaning, entry_id)
        built.codes.append(code)
        built.names.setdefault(name.lower(), code)
        for other in (item.get(k) for k in enum.get("names_from", ())):
            if other:
                built.names.setdefault(other.lower(), code)
        if "camel" in enum:  # bindings' exception classes: CUFFT_INVALID_VALUE -> cufftInvalidValue
            rest = name[len(enum["strip"]):] if name.startswith(enum["strip"]) else name
            camel = enum["camel"] + "".join(w.capitalize() for w in rest.split("_"))
            if len(camel) >= enum.get("camel_min", 0):  # a bare "NotSupported" names nothing
                built.names.setdefault(camel.lower(), code)
        described = item.get("description")
        if described and len(described) >= _description_length(built):  # wrappers that print the doc
            built.described.setdefault(_plain(described.split(". ")[0]), set()).add(code)
        texts = [message, *wordings.get(name, ()), *(item.get(k) for k in enum.get("wordings_from", ()))]
        if enum.get("derive_messages"):  # a library without a string function: its name's words
            texts.append(kebab(name, enum["strip"]).replace("-", " "))
        for text in (line for text in texts if text for line in text.split("\n")):
            if text and "%" not in text and text != name and _plain(text):
                messages.setdefault(_plain(text), code)
        if item.get("number") is not None and not item.get("alias_of"):
            numbers["new"].setdefault(item["number"], code)
        for old in item.get("old_numbers") or ():
            numbers["old"].setdefault(old, code)


def _description_length(built: Tables) -> int:
    """How long a code's documented sentence must be to name it alone (``description_length``)."""
    return built.spec.get("description_length", 10**6)


def _plain(text: str) -> str:
    """A message as searched: lower case, without the trailing full stop and spaces."""
    return text.strip().rstrip(".").strip().lower()


def _generated(spec: dict[str, Any], enum: dict[str, Any], item: dict[str, Any], entry_id: str) -> dict[str, Any]:
    category = spec["categories"][_category(enum, item["name"])]
    meaning = item.get("description") or item.get("message") or item["name"]
    return {"id": entry_id, "number": None, "title": f"{item['name']}: {item.get('message') or meaning}",
            "severity": "error", "rank": enum["rank"], "patterns": [], "literals": [],
            "cause": f"{category['lead']} {item['name']}: {meaning}", "fix": category["fix"],
            "links": enum["links"], "refines": enum.get("refines")}


def _distinctive(built: Tables, spec: dict[str, Any]) -> None:
    """Messages that name their code alone, without a wrapper around them: long enough, and
    every enumeration that prints them means the same cause by them."""
    seen: dict[str, set[str]] = {}
    first: dict[str, Code] = {}
    for enum_messages in built.messages.values():
        for text, code in enum_messages.items():
            seen.setdefault(text, set()).add(code.entry)
            first.setdefault(text, code)
    for text, codes in built.described.items():  # ManagedCuda and others print the header's sentence
        # one cause, or the runtime's and the driver's twin codes documented by the same sentence
        if text not in seen and (len({c.entry for c in codes}) == 1
                                 or {c.enumeration for c in codes} == {"cudaError_t", "CUresult"}):
            code = min(codes, key=lambda c: c.enumeration)  # CUresult's: the driver API's wrappers print it
            seen[text], first[text] = {code.entry}, code
    for text, entries in seen.items():
        if len(text) < spec["distinctive_length"] or text in spec["not_distinctive"]:
            continue
        if len(entries) == 1:
            built.phrases[text] = first[text]
        elif len({e for e in entries if not e.startswith("hip-")}) == 1 and first[text].entry.startswith("cuda-"):
            # HIP copied CUDA's message ("too many resources requested for launch"): CUDA's code
            # alone, HIP's wherever a HIP wrapper around it says so (recognise.py orders them so)
            built.mirrored[text] = first[text]


def _xids(built: Tables, spec: dict[str, Any], data: dict[str, Any]) -> None:
    rule = spec["xid"]
    buckets = data["resolution_buckets"]
    for item in data["entries"]:
        number = item["number"]
        entry_id = rule["causes"].get(str(number)) or f"xid-{number}"
        meaning = item.get("description") or (item.get("driver_names") or [item["name"]])[0]
        if entry_id not in built.generated and entry_id.startswith("xid-"):
            action = item.get("immediate_action") or "CONTACT_SUPPORT"
            fix = f"NVIDIA's action for Xid {number}: {action}: {buckets.get(action, action)}"
            if item.get("investigatory_action"):
                fix += f" To investigate: {item['investigatory_action']}."
            cause = f"The NVIDIA driver logged Xid {number} ({item['name']}): {meaning}."
            if item.get("trigger_conditions"):
                cause += " " + item["trigger_conditions"][:600]
            built.generated[entry_id] = {
                "id": entry_id, "number": None, "title": f"Xid {number}: {meaning}", "severity": "error",
                "rank": 3, "patterns": [], "literals": [], "cause": cause, "fix": fix,
                "links": [rule["link"]], "refines": rule["refines"].get(str(number), rule["refines"]["*"])}
        built.xids[number] = Code("Xid", item["name"], number, None, meaning, entry_id)


def _nccl_warns(built: Tables, spec: dict[str, Any], data: dict[str, Any]) -> None:
    results = {code.name: code.entry for code in built.codes if code.enumeration == "ncclResult_t"}
    rule = spec["nccl_warn"]
    seen: set[str] = set()
    for item in data["entries"]:  # newest release first: an older copy of the same wording adds nothing
        if item["format"] in seen:
            continue
        seen.add(item["format"])
        entry_id = results.get(item.get("result_nearby") or "", rule["default"])
        code = Code("NCCL WARN", item["name"], None, item["format"].split("\n")[0], item.get("result_nearby"),
                    entry_id)
        _add_format(built, code, item["format"], context="nccl warn",
                    short=(rule["long_literal"], rule["short_requires"]))


def _messages(built: Tables, spec: dict[str, Any], file: str, data: dict[str, Any]) -> None:
    """Each line of each wording as a format; a line of a message printed over several lines that
    another message of another cause begins the same way (the driver's "NVRM: The NVIDIA GPU
    %04x:..." heads several) stands for neither: its other lines name the cause."""
    causes = spec["messages"][file]
    rules = {item["name"]: causes[item["name"]] for item in data["entries"]}
    entry_of = {name: (rule if isinstance(rule, str) else rule["cause"]) for name, rule in rules.items() if rule}
    shared: dict[str, set[str]] = {}
    for item in data["entries"]:
        if item["name"] in entry_of:
            for line in item["message"].split("\n"):
                shared.setdefault(_literal(line), set()).add(entry_of[item["name"]])
    for item in data["entries"]:
        rule = rules[item["name"]]
        if rule is None:  # recognised through a context (the loader's library, a module's errno)
            continue
        entry_id, requires = (rule, None) if isinstance(rule, str) else (rule["cause"], rule.get("requires"))
        lines = item["message"].split("\n")
        for line in lines:
            if len(lines) > 1 and len(shared[_literal(line)]) > 1:
                continue
            code = Code(file.removesuffix(".json"), item["name"], None, line.strip(),
                        item.get("meaning"), entry_id)
            _add_format(built, code, line, requires=requires, whole=False)


def _unprefixed(line: str) -> str:
    """A wording's line without the kernel module's ``NVRM: `` prefix (logs put it anywhere)."""
    line = line.strip()
    return line[len("NVRM: "):].strip() if line.startswith("NVRM: ") else line


def _literal(line: str) -> str:
    """A wording's line as ``_add_format`` keys it: its longest literal, lower case."""
    return max((p.strip().lower() for p in FORMAT_SPEC.split(_unprefixed(line))), key=len, default="")


def _add_format(built: Tables, code: Code, text: str, context: str | None = None,
                requires: str | None = None, whole: bool = True,
                short: tuple[int, str] | None = None) -> None:
    """``text`` (its first line) as a ``Format``; a fragment of a multi-line message (``whole``
    False) only when its literal is long enough to stand for it."""
    line = _unprefixed(text.split("\n")[0])
    pieces = FORMAT_SPEC.split(line)
    key = _literal(line)
    literal = max(key.split() or [""], key=len)  # a word every match holds, whatever its spacing
    if len(key) < MIN_CONTEXT_LITERAL:  # nothing but fields: any text would match it
        return
    if len(key) < MIN_LITERAL:
        if not whole:
            return
        key = ""
    if not key and context is None:
        return
    if short and len(key) < short[0]:  # a short wording counts only beside its tool's name
        requires = short[1]
    pattern = "".join(_piece(p) + (r".{0,160}?" if i < len(pieces) - 1 else "") for i, p in enumerate(pieces))
    built.formats.append(Format(code, pattern, key, literal, context, requires))


def _piece(text: str) -> str:
    return r"\s{1,4}".join(re.escape(word) for word in text.split())
