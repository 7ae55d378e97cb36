"""CUresult: names and numbers from cuda.h, messages from the driver's own cuGetErrorString and
cuGetErrorName (libcuda.so; neither needs cuInit nor a GPU).

    python bench/enumerations/extract_cuda_driver.py --header .../include/cuda.h \
        --lib .../libcuda.so.1 --driver 555.58.02 > CUresult.json

A code newer than the driver library has no message there: cuGetErrorString answers
CUDA_ERROR_INVALID_VALUE and the entry's message stays null.
"""
from __future__ import annotations

import argparse
import ctypes

import _enum

IN_PROGRESS = {"CUDA_ERROR_NOT_READY"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--header", required=True)
    parser.add_argument("--lib", required=True)
    parser.add_argument("--version", default="13.0")
    parser.add_argument("--driver", required=True, help="the driver version of --lib")
    parser.add_argument("--lib-source", default=None)
    args = parser.parse_args()

    enumerators = _enum.parse_enum(_enum.enum_body(_enum.read(args.header), "CUresult"))
    driver = _enum.load(args.lib)
    out = ctypes.c_char_p()

    def ask(fn, number):
        out.value = None
        status = fn(number, ctypes.byref(out))
        return out.value.decode() if status == 0 and out.value is not None else None

    entries = []
    for item in enumerators:
        name, number = item["name"], item["value"]
        message = ask(driver.cuGetErrorString, number)
        library_name = ask(driver.cuGetErrorName, number)
        entry = {"name": name, "number": number, "message": message,
                 "description": _enum.sentences(item["doc"])}
        if library_name and library_name != name:
            entry["library_name"] = library_name
        if message is None:
            entry["message_note"] = f"driver {args.driver}'s cuGetErrorString does not know this code"
        if item["deprecated"]:
            entry["deprecated"] = True
        if item["alias_of"]:
            entry["alias_of"] = item["alias_of"]
        if number == 0:
            entry["success"] = True
        if name in IN_PROGRESS:
            entry["in_progress"] = True
        entries.append(entry)

    source = {
        "url": "https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html",
        "repository": None,
        "path": "include/cuda.h (typedef enum cudaError_enum ... CUresult)",
        "commit": None,
        "version": f"CUDA {args.version} (PyPI nvidia-cuda-runtime 13.0.96)",
    }
    message_source = {
        "function": "cuGetErrorString / cuGetErrorName",
        "library": "libcuda.so.1",
        "driver": args.driver,
        "package": args.lib_source,
    }
    _enum.emit(_enum.document("CUresult", source, entries, message_source=message_source,
                              message_function="cuGetErrorString",
                              printed_forms=["CUDA_ERROR_X", "CUDA error: <message>"]))


if __name__ == "__main__":
    main()
