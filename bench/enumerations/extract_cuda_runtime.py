"""cudaError_t: names and numbers from driver_types.h, messages from the runtime's own
cudaGetErrorString/cudaGetErrorName, old (pre-CUDA 10.1) numbers from a CUDA 10.0 listing.

    python bench/enumerations/extract_cuda_runtime.py \
        --header .../include/driver_types.h --lib .../lib/libcudart.so.13 \
        --old-java cudaError-10.0.java --old-java-new cudaError-10.1.java > cudaError_t.json

The old listing is JCuda's transcription of driver_types.h (jcuda/jcuda,
JCudaJava/src/main/java/jcuda/runtime/cudaError.java at its CUDA 10.0 and 10.1 tags): the
10.0 file gives the numbers frameworks built against CUDA <= 10.0 printed, the 10.1 one shows
the renumbering happened there.
"""
from __future__ import annotations

import argparse
import re

import _enum

IN_PROGRESS = {"cudaErrorNotReady"}


def java_constants(path: str) -> dict[str, int]:
    text = _enum.read(path)
    return {name: int(value, 0) for name, value in
            re.findall(r"public static final int (cuda\w+)\s*=\s*(-?(?:0x[0-9a-fA-F]+|\d+))\s*;", text)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--header", required=True)
    parser.add_argument("--lib", required=True)
    parser.add_argument("--old-java", required=True, help="JCuda cudaError.java at CUDA 10.0")
    parser.add_argument("--old-java-new", required=True, help="JCuda cudaError.java at CUDA 10.1")
    parser.add_argument("--version", default="13.0")
    parser.add_argument("--url", default=None)
    parser.add_argument("--package", default=None)
    args = parser.parse_args()

    text = _enum.read(args.header)
    enumerators = _enum.parse_enum(_enum.enum_body(text, "cudaError"))
    runtime = _enum.load(args.lib)
    get_string = _enum.c_string_fn(runtime, "cudaGetErrorString")
    get_name = _enum.c_string_fn(runtime, "cudaGetErrorName")
    old = java_constants(args.old_java)
    after = java_constants(args.old_java_new)

    entries = []
    current_names = set()
    for item in enumerators:
        name, number = item["name"], item["value"]
        current_names.add(name)
        library_name = get_name(number)
        message = get_string(number)
        unrecognized = message == "unrecognized error code"
        old_numbers = [old[name]] if name in old and old[name] != number else []
        entry = {
            "name": name,
            "number": number,
            "old_numbers": old_numbers,
            "message": None if unrecognized else message,
            "description": _enum.sentences(item["doc"]),
        }
        if library_name != name and not unrecognized:
            entry["library_name"] = library_name   # cudaGetErrorName answers another name
        if old_numbers:
            entry["renumbered_in"] = "10.1" if after.get(name) == number else None
        if item["deprecated"]:
            entry["deprecated"] = True
        if item["alias_of"]:
            entry["alias_of"] = item["alias_of"]
        if number == 0:
            entry["success"] = True
        if name in IN_PROGRESS:
            entry["in_progress"] = True
        entries.append(entry)

    # Names CUDA 10.0 had that today's header no longer has.
    for name, number in sorted(old.items(), key=lambda kv: kv[1]):
        if name in current_names or not name.startswith("cudaError"):
            continue
        entries.append({"name": name, "number": None, "old_numbers": [number], "message": None,
                        "description": None, "removed": True,
                        "removed_note": "in JCuda's CUDA 10.0 listing, not in this header"})

    source = {
        "url": args.url,
        "repository": None,
        "path": "include/driver_types.h (enum cudaError); messages: lib/libcudart.so cudaGetErrorString",
        "commit": None,
        "version": f"CUDA runtime {args.version}" + (f" ({args.package})" if args.package else ""),
    }
    old_source = {
        "repository": "jcuda/jcuda",
        "path": "JCudaJava/src/main/java/jcuda/runtime/cudaError.java",
        "commit_cuda_10_0": "2da399fdb60e8b54c45e86c6ba15a82b446e2c63 (tag version-10.0.0-RC01)",
        "commit_cuda_10_1": "5495d71778a835536e2a436555637898465c5eab (tag version-10.1.0-RC00)",
        "note": "JCuda's transcription of driver_types.h per CUDA release; old_numbers are the CUDA 10.0 values",
    }
    _enum.emit(_enum.document("cudaError_t", source, entries, old_numbers_source=old_source,
                              message_function="cudaGetErrorString",
                              printed_forms=["cudaErrorX", "CUDA error: <message>",
                                             "cuda runtime error (N) : <message>"]))


if __name__ == "__main__":
    main()
