"""cudnnStatus_t: cuDNN 9's hierarchical codes (cudnn_graph.h) and the classic cuDNN 8 codes
(cudnn_ops_infer.h), each with the text cudnnGetErrorString returns in that release.

    python bench/enumerations/extract_cudnn.py \
        --header9 .../cudnn/include/cudnn_graph.h --lib9 .../cudnn/lib/libcudnn_graph.so.9 \
        --header8 .../cudnn/include/cudnn_ops_infer.h --lib8 .../cudnn/lib/libcudnn_ops_infer.so.8 \
        > cudnnStatus_t.json

cudnnGetErrorString answers the enumerator's own name (CUDNN_STATUS_...); for a deprecated
alias it answers the name of the code the alias stands for. A cuDNN 8 name keeps its cuDNN 8
number in old_numbers (cuDNN 9 renumbered every code); a name cuDNN 9 no longer has is kept
with number null.
"""
from __future__ import annotations

import argparse
import re

import _enum

IN_PROGRESS = {"CUDNN_STATUS_RUNTIME_IN_PROGRESS"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--header9", required=True)
    parser.add_argument("--lib9", required=True)
    parser.add_argument("--version9", default="9.27.0")
    parser.add_argument("--header8", required=True)
    parser.add_argument("--lib8", required=True)
    parser.add_argument("--version8", default="8.9.7")
    args = parser.parse_args()

    new = _enum.parse_enum(_enum.enum_body(_enum.read(args.header9), "cudnnStatus_t"))
    old = _enum.parse_enum(_enum.enum_body(_enum.read(args.header8), "cudnnStatus_t"))
    string9 = _enum.c_string_fn(_enum.load(args.lib9), "cudnnGetErrorString")
    string8 = _enum.c_string_fn(_enum.load(args.lib8), "cudnnGetErrorString")
    old_by_name = {item["name"]: item for item in old}

    entries = []
    seen = set()
    for item in new:
        name, number = item["name"], item["value"]
        seen.add(name)
        message = string9(number)
        doc = item["doc"] or ""
        since = re.search(r"@since cuDNN ([\d.]+)", doc)
        doc = re.sub(r"\s*@since cuDNN [\d.]+", "", doc).strip()
        entry = {"name": name, "number": number, "old_numbers": [], "message": message,
                 "description": _enum.sentences(doc)}
        if since:
            entry["since"] = since.group(1)
        if message == "CUDNN_UNKNOWN_STATUS":
            entry["message"] = None
        if name in old_by_name:
            entry["old_numbers"] = [old_by_name[name]["value"]]
            entry["old_message"] = string8(old_by_name[name]["value"])
        if item["alias_of"]:
            entry["alias_of"] = item["alias_of"]
        if item["deprecated"]:
            entry["deprecated"] = True
        if number == 0:
            entry["success"] = True
            entry["old_numbers"] = []
        if name in IN_PROGRESS:
            entry["in_progress"] = True
        entries.append(entry)
    for item in old:
        if item["name"] in seen:
            continue
        entries.append({"name": item["name"], "number": None, "old_numbers": [item["value"]],
                        "message": None, "old_message": string8(item["value"]),
                        "description": _enum.sentences(item["doc"]), "removed_in": "9.0"})

    source = {
        "url": "https://docs.nvidia.com/deeplearning/cudnn/backend/latest/api/cudnn-graph-library.html",
        "repository": None,
        "path": "include/cudnn_graph.h (cudnnStatus_t); messages: lib/libcudnn_graph.so.9 cudnnGetErrorString",
        "commit": None,
        "version": f"cuDNN {args.version9} (PyPI nvidia-cudnn-cu13 9.27.0.42)",
    }
    old_source = {
        "path": "include/cudnn_ops_infer.h (cudnnStatus_t); messages: lib/libcudnn_ops_infer.so.8 cudnnGetErrorString",
        "version": f"cuDNN {args.version8} (PyPI nvidia-cudnn-cu12 8.9.7.29)",
    }
    _enum.emit(_enum.document("cudnnStatus_t", source, entries, old_numbers_source=old_source,
                              message_function="cudnnGetErrorString",
                              printed_forms=["CUDNN_STATUS_X", "cuDNN error: CUDNN_STATUS_X"]))


if __name__ == "__main__":
    main()
