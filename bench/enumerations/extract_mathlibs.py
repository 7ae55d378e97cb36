"""The CUDA math libraries' status enumerations: cublasStatus_t, cufftResult, cusolverStatus_t,
cusparseStatus_t, curandStatus_t. Names and numbers from the header; messages where the
library has a string function (cublasGetStatusString, cusparseGetErrorString; cuFFT, cuSOLVER
and cuRAND have none, so their messages are null); descriptions from the header's comments
where it has them (curand.h). A --prev-header (the CUDA 12 release of the same header) adds
the codes the current release dropped, marked removed_in.

    python bench/enumerations/extract_mathlibs.py --which cublas \
        --header .../cu13/include/cublas_api.h --lib .../cu13/lib/libcublas.so.13 \
        --version "cuBLAS 13.1 (PyPI nvidia-cublas 13.10.0.20)" > cublasStatus_t.json
"""
from __future__ import annotations

import argparse

import _enum

LIBS = {
    "cublas": {"enum": "cublasStatus_t", "message_fn": "cublasGetStatusString",
               "name_fn": "cublasGetStatusName",
               "url": "https://docs.nvidia.com/cuda/cublas/#cublasstatus-t",
               "path": "include/cublas_api.h"},
    "cufft": {"enum": "cufftResult", "message_fn": None, "name_fn": None,
              "url": "https://docs.nvidia.com/cuda/cufft/#cufftresult",
              "path": "include/cufft.h"},
    "cusolver": {"enum": "cusolverStatus_t", "message_fn": None, "name_fn": None,
                 "url": "https://docs.nvidia.com/cuda/cusolver/#cusolverstatus-t",
                 "path": "include/cusolver_common.h"},
    "cusparse": {"enum": "cusparseStatus_t", "message_fn": "cusparseGetErrorString",
                 "name_fn": "cusparseGetErrorName",
                 "url": "https://docs.nvidia.com/cuda/cusparse/#cusparsestatus-t",
                 "path": "include/cusparse.h"},
    "curand": {"enum": "curandStatus_t", "tag": "curandStatus", "message_fn": None, "name_fn": None,
               "url": "https://docs.nvidia.com/cuda/curand/group__HOST.html",
               "path": "include/curand.h"},
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--which", required=True, choices=sorted(LIBS))
    parser.add_argument("--header", required=True)
    parser.add_argument("--lib", default=None)
    parser.add_argument("--version", required=True)
    parser.add_argument("--prev-header", default=None)
    parser.add_argument("--prev-version", default=None)
    args = parser.parse_args()
    spec = LIBS[args.which]

    items = _enum.parse_enum(_enum.enum_body(_enum.read(args.header), spec.get("tag", spec["enum"])))
    message = name_of = None
    if args.lib and spec["message_fn"]:
        library = _enum.load(args.lib)
        message = _enum.c_string_fn(library, spec["message_fn"])
        name_of = _enum.c_string_fn(library, spec["name_fn"]) if spec["name_fn"] else None

    entries = []
    names = set()
    for item in items:
        name, number = item["name"], item["value"]
        names.add(name)
        entry = {"name": name, "number": number,
                 "message": message(number) if message else None,
                 "description": _enum.sentences(item["doc"])}
        if name_of and name_of(number) != name:
            entry["library_name"] = name_of(number)
        if item["alias_of"]:
            entry["alias_of"] = item["alias_of"]
        if item["deprecated"]:
            entry["deprecated"] = True
        if number == 0:
            entry["success"] = True
        entries.append(entry)
    if args.prev_header:
        for item in _enum.parse_enum(_enum.enum_body(_enum.read(args.prev_header), spec.get("tag", spec["enum"]))):
            if item["name"] in names:
                continue
            entries.append({"name": item["name"], "number": item["value"], "message": None,
                            "description": _enum.sentences(item["doc"]),
                            "absent_from": args.version,
                            "last_seen_in": args.prev_version})

    source = {"url": spec["url"], "repository": None, "path": spec["path"], "commit": None,
              "version": args.version}
    extra = {"message_function": spec["message_fn"]}
    _enum.emit(_enum.document(spec["enum"], source, entries, **extra))


if __name__ == "__main__":
    main()
