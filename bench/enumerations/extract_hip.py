"""hipError_t: names, numbers and doc comments from HIP's include/hip/hip_runtime_api.h
(ROCm/HIP), messages and names from the AMD runtime's hipGetErrorString/hipGetErrorName
switches (ROCm/clr, hipamd/src/hip_error.cpp: ihipGetErrorString, ihipGetErrorName).

    python bench/enumerations/extract_hip.py --header hip_runtime_api.h \
        --error-cpp hip_error.cpp --hip-commit C1 --clr-commit C2 > hipError_t.json

The header gives some numbers two names (the later one marked "// Deprecated"); such a name
is kept with alias_of naming the first. A code the switch has no case for gets
"unknown error" from the runtime (its default); the entry's message is then null.
"""
from __future__ import annotations

import argparse
import re

import _enum

IN_PROGRESS = {"hipErrorNotReady"}


def switch(text: str, function: str) -> tuple[dict[str, str], str | None]:
    start = text.index(f"{function}(hipError_t")
    body = text[start:]
    body = body[:body.index("\n}")]
    cases: dict[str, str] = {}
    pending: list[str] = []
    for match in re.finditer(r"case\s+(?P<case>hipError\w+|hipSuccess)\s*:|return\s+\"(?P<ret>[^\"]*)\"\s*;"
                             r"|(?P<default>default)\s*:", body):
        if match.group("case"):
            pending.append(match.group("case"))
        elif match.group("ret") is not None and pending:
            for item in pending:
                cases[item] = match.group("ret")
            pending = []
    default = re.search(r"default\s*:\s*return\s+\"([^\"]*)\"", body)
    return cases, default.group(1) if default else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--header", required=True)
    parser.add_argument("--error-cpp", required=True)
    parser.add_argument("--hip-commit", required=True)
    parser.add_argument("--clr-commit", required=True)
    args = parser.parse_args()

    items = _enum.parse_enum(_enum.enum_body(_enum.read(args.header), "hipError_t"))
    cpp = _enum.read(args.error_cpp)
    messages, default_message = switch(cpp, "ihipGetErrorString")
    names, default_name = switch(cpp, "ihipGetErrorName")

    first_of: dict[int, str] = {}
    entries = []
    for item in items:
        name, number = item["name"], item["value"]
        entry = {"name": name, "number": number, "message": messages.get(name),
                 "description": _enum.sentences(item["doc"])}
        if number in first_of:
            entry["message"] = messages.get(first_of[number])   # the runtime sees only the number
        elif name not in messages:
            entry["message_note"] = f"no case in ihipGetErrorString; the runtime answers {default_message!r}"
        if names.get(name, name) != name:
            entry["library_name"] = names[name]
        if number in first_of:
            entry["alias_of"] = first_of[number]
        else:
            first_of[number] = name
        if item["deprecated"]:
            entry["deprecated"] = True
        if number == 0:
            entry["success"] = True
        if name in IN_PROGRESS:
            entry["in_progress"] = True
        if name == "hipErrorTbd":
            entry["not_a_result"] = True   # "Marker that more error codes are needed"
        entries.append(entry)

    source = {
        "url": "https://rocm.docs.amd.com/projects/HIP/en/latest/doxygen/html/group___error.html",
        "repository": "ROCm/HIP",
        "path": "include/hip/hip_runtime_api.h (hipError_t)",
        "commit": args.hip_commit,
        "version": "ROCm/HIP as of 2024-10-16",
    }
    message_source = {"repository": "ROCm/clr", "path": "hipamd/src/hip_error.cpp (ihipGetErrorString, ihipGetErrorName)",
                      "commit": args.clr_commit, "default_message": default_message, "default_name": default_name}
    _enum.emit(_enum.document("hipError_t", source, entries, message_source=message_source,
                              message_function="hipGetErrorString",
                              printed_forms=["hipErrorX", "HIP error: <message>"]))


if __name__ == "__main__":
    main()
