"""miopenStatus_t: names, numbers and doc comments from MIOpen's header (ROCm/MIOpen
include/miopen/miopen.h). miopenGetErrorString answers the enumerator's own name (MIOpen's
test/gtest/errors.cpp holds it so), so the message is the name and the description the header's
comment; MIOpen's exceptions print "MIOpen Error: <file>:<line>: <text>" and frameworks print the
name ("RuntimeError: miopenStatusInternalError").

    python bench/enumerations/extract_miopen.py --repo MIOpen-checkout --commit C > miopenStatus_t.json
"""
from __future__ import annotations

import argparse

import _enum

HEADER = "include/miopen/miopen.h"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    parser.add_argument("--commit", required=True)
    args = parser.parse_args()
    text = _enum.git_show(args.repo, args.commit, HEADER)
    entries = []
    for item in _enum.parse_enum(_enum.enum_body(text, "miopenStatus_t")):
        entry = {"name": item["name"], "number": item["value"], "message": item["name"],
                 "description": _enum.sentences(item["doc"])}
        if item["value"] == 0:
            entry["success"] = True
        if item["name"] == "miopenStatusGpuOperationsSkipped":  # "This is not an error."
            entry["not_a_result"] = True
        entries.append(entry)
    source = {"url": "https://rocm.docs.amd.com/projects/MIOpen/en/latest/doxygen/html/group__handle.html",
              "repository": "ROCm/MIOpen", "path": f"{HEADER} (miopenStatus_t)", "commit": args.commit,
              "version": "MIOpen as of 2024-10-24"}
    _enum.emit(_enum.document("miopenStatus_t", source, entries, message_function="miopenGetErrorString",
                              printed_forms=["miopenStatusX", "MIOpen Error: <file>:<line>: <text>"]))


if __name__ == "__main__":
    main()
