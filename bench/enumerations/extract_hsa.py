"""hsa_status_t: names, numbers and doc comments from the HSA runtime's headers (ROCm/ROCR-Runtime
runtime/hsa-runtime/inc/hsa.h, enum hsa_status_t, and the AMD additions to it in hsa_ext_amd.h),
messages from the runtime's hsa_status_string switch (runtime/hsa-runtime/core/runtime/hsa.cpp).

    python bench/enumerations/extract_hsa.py --repo ROCR-Runtime-checkout --commit C > hsa_status_t.json

hsa_status_string answers "<NAME>: <sentence>"; that whole string is the message (the HIP runtime
prints it inside "Callback: Queue %p aborting with error : %s code: 0x%x", ROCR's default queue
error handler inside "Queue at %p inactivated due to async error:\\n\\t%s").
"""
from __future__ import annotations

import argparse
import re

import _enum

HEADER = "runtime/hsa-runtime/inc/hsa.h"
AMD_HEADER = "runtime/hsa-runtime/inc/hsa_ext_amd.h"
STRINGS = "runtime/hsa-runtime/core/runtime/hsa.cpp"


def amd_body(text: str) -> str:
    start = text.index("Enumeration constants added to ::hsa_status_t")
    match = re.compile(r"\benum\s*\{(?P<body>[^{}]*)\}").search(text, start)
    return match.group("body")


def strings(text: str) -> dict[str, str]:
    body = text[text.index("hsa_status_t hsa_status_string("):]
    body = body[:body.index("\n}")]
    out: dict[str, str] = {}
    pending: list[str] = []
    for match in re.finditer(r"case\s+(?P<case>HSA_\w+)\s*:|\*status_string\s*=\s*(?P<lits>(?:\"(?:[^\"\\]|\\.)*\"\s*)+);",
                             body):
        if match.group("case"):
            pending.append(match.group("case"))
        elif pending:
            text_ = "".join(_enum.c_unescape(p) for p in re.findall(r'"((?:[^"\\]|\\.)*)"', match.group("lits")))
            for name in pending:
                out[name] = text_
            pending = []
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    parser.add_argument("--commit", required=True)
    args = parser.parse_args()
    items = _enum.parse_enum(_enum.enum_body(_enum.git_show(args.repo, args.commit, HEADER), "hsa_status_t"))
    amd = _enum.parse_enum(amd_body(_enum.git_show(args.repo, args.commit, AMD_HEADER)))
    messages = strings(_enum.git_show(args.repo, args.commit, STRINGS))
    entries = []
    for item, header in [(i, HEADER) for i in items] + [(i, AMD_HEADER) for i in amd]:
        name = item["name"]
        entry = {"name": name, "number": item["value"], "message": messages.get(name),
                 "description": _enum.sentences(item["doc"])}
        if header == AMD_HEADER:
            entry["header"] = "hsa_ext_amd.h"
        if name not in messages:
            entry["message_note"] = "no case in hsa_status_string (it returns HSA_STATUS_ERROR_INVALID_ARGUMENT)"
        if item["value"] == 0:
            entry["success"] = True
        if item["deprecated"]:
            entry["deprecated"] = True
        entries.append(entry)
    source = {"url": "https://rocm.docs.amd.com/projects/ROCR-Runtime/en/latest/",
              "repository": "ROCm/ROCR-Runtime", "path": f"{HEADER} (hsa_status_t), {AMD_HEADER} (additions)",
              "commit": args.commit, "version": "ROCR-Runtime as of 2024-10-23 (after rocm-6.2.2)"}
    message_source = {"repository": "ROCm/ROCR-Runtime", "path": f"{STRINGS} (hsa_status_string)",
                      "commit": args.commit}
    _enum.emit(_enum.document("hsa_status_t", source, entries, message_source=message_source,
                              message_function="hsa_status_string",
                              printed_forms=["HSA_STATUS_ERROR_X",
                                             "Callback: Queue %p aborting with error : <message> code: 0x<number>",
                                             "Queue at %p inactivated due to async error:\\n\\t<message>"]))


if __name__ == "__main__":
    main()
