"""nvmlReturn_t: names, numbers and doc comments from nvml.h, nvmlErrorString texts from the
driver's libnvidia-ml.so, pynvml's own text table (nvidia-ml-py's NVMLError._errcode_to_string,
which pynvml prints before asking the library), and nvidia-smi's wording.

    python bench/enumerations/extract_nvml.py --header .../include/nvml.h \
        --lib .../libnvidia-ml.so.1 --pynvml .../site-packages/pynvml.py \
        --smi .../nvidia-smi --driver 555.58.02 > nvmlReturn_t.json

nvidia-smi is run twice, on a machine without an NVIDIA kernel module loaded (as here): once
with no libnvidia-ml.so anywhere it looks (it exits with NVML_ERROR_LIBRARY_NOT_FOUND, 12) and
once with --lib's directory on LD_LIBRARY_PATH (nvmlInit fails with
NVML_ERROR_DRIVER_NOT_LOADED, 9). Its other init failures print "Failed to initialize NVML: %s"
with the library's string (the format string is in the binary); the messages it has of its own
are listed from the binary's strings.
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import tempfile
from pathlib import Path

import _enum

SMI_STRINGS = [
    "Failed to initialize NVML: %s",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.",
    "NVIDIA-SMI couldn't find %s library in your system. Please make sure that the NVIDIA Display Driver is properly installed and present in your system.",
    "Please also try adding directory that contains %s to your system PATH.",
    "No devices were found",
    "No devices were found. Please make sure /dev/nvidia* files are readable by current user.",
    "Unable to determine the device handle for GPU %s: %s",
    "Unable to determine the device handle for gpu %s: %s",
    "Mismatch in versions between nvidia-smi and NVML.",
    "Mismatch in expected NVML version.  Are you sure you are using the correct NVML version?",
    "Unable to communicate with GPU because it is insufficiently powered.",
    "Failed to properly shut down NVML: %s",
    "Internal NVML error",
]


def pynvml_table(path: str) -> tuple[dict[str, str], dict[str, int]]:
    """pynvml's NVMLError._errcode_to_string (by constant name) and its NVML_ERROR_* numbers."""
    tree = ast.parse(_enum.read(path))
    numbers: dict[str, int] = {}
    table: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.startswith(("NVML_ERROR_", "NVML_SUCCESS")) and isinstance(node.value, ast.Constant):
                numbers[name] = node.value.value
            if name == "_errcode_to_string" and isinstance(node.value, ast.Dict):
                for key, value in zip(node.value.keys, node.value.values):
                    if isinstance(key, ast.Name) and isinstance(value, ast.Constant):
                        table[key.id] = value.value
    return table, numbers


def pynvml_class(name: str) -> str:
    """The exception class pynvml makes for a code (its _extractNVMLErrorsAsClasses rule)."""
    import string
    return "NVMLError_" + string.capwords(name.replace("NVML_ERROR_", ""), "_").replace("_", "")


def binary_strings(path: str, minimum: int = 4) -> set[str]:
    data = Path(path).read_bytes()
    return {s.decode("ascii") for s in re.findall(rb"[\x20-\x7e\t]{%d,}" % minimum, data)}


def run_smi(smi: str, lib_dir: str | None) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    with tempfile.TemporaryDirectory() as empty:
        env["LD_LIBRARY_PATH"] = lib_dir or empty
        proc = subprocess.run([smi], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=60)
    return proc.returncode, proc.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--header", required=True)
    parser.add_argument("--lib", required=True)
    parser.add_argument("--pynvml", required=True)
    parser.add_argument("--pynvml-version", default="13.615.71")
    parser.add_argument("--smi", required=True)
    parser.add_argument("--driver", required=True)
    args = parser.parse_args()

    enumerators = _enum.parse_enum(_enum.enum_body(_enum.read(args.header), "nvmlReturn_t"))
    nvml = _enum.load(args.lib)
    error_string = _enum.c_string_fn(nvml, "nvmlErrorString")
    py_table, py_numbers = pynvml_table(args.pynvml)
    smi_strings = binary_strings(args.smi)
    unknown_text = error_string(123456)

    observed = {}
    rc, out = run_smi(args.smi, None)
    observed[rc] = out
    rc, out = run_smi(args.smi, str(Path(args.lib).parent))
    observed[rc] = out

    entries = []
    for item in enumerators:
        name, number = item["name"], item["value"]
        message = error_string(number)
        if message == unknown_text and name != "NVML_ERROR_UNKNOWN":
            message = None     # this library does not know the code
        entry = {"name": name, "number": number, "message": message,
                 "description": _enum.sentences(item["doc"])}
        if message is None:
            entry["message_note"] = f"libnvidia-ml.so {args.driver} answers its unknown-code text for this number"
        if name in py_table:
            entry["pynvml_message"] = py_table[name]
        if name != "NVML_SUCCESS":
            entry["pynvml_class"] = pynvml_class(name)
        if py_numbers.get(name, number) != number:
            entry["pynvml_number"] = py_numbers[name]
        if message:
            entry["message_in_nvidia_smi_binary"] = message in smi_strings
        if number in observed:
            entry["nvidia_smi"] = observed[number]
            entry["nvidia_smi_exit_code"] = number
        elif number != 0:
            entry["nvidia_smi"] = f"Failed to initialize NVML: {message}" if message else None
            entry["nvidia_smi_note"] = "format string from the nvidia-smi binary, for nvmlInit failures; not observed"
        if item["deprecated"]:
            entry["deprecated"] = True
        if number == 0:
            entry["success"] = True
        entries.append(entry)

    source = {
        "url": "https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html",
        "repository": None,
        "path": "include/nvml.h (typedef enum nvmlReturn_enum ... nvmlReturn_t)",
        "commit": None,
        "version": "NVML API 13, PyPI nvidia-nvml-dev 13.4.92",
    }
    extra = {
        "message_source": {"function": "nvmlErrorString", "library": "libnvidia-ml.so.1",
                           "driver": args.driver,
                           "package": f"Debian experimental non-free libnvidia-ml1 {args.driver}-4"},
        "pynvml_source": {"package": f"PyPI nvidia-ml-py {args.pynvml_version}", "path": "pynvml.py",
                          "note": "NVMLError.__str__ prints this table's text before asking nvmlErrorString"},
        "nvidia_smi_source": {"package": f"Debian experimental non-free nvidia-smi {args.driver}-4",
                              "observed": {str(k): v for k, v in sorted(observed.items())},
                              "note": "exit code is the nvmlReturn_t of the failure"},
        "nvidia_smi_messages": [s for s in SMI_STRINGS if s in smi_strings],
        "message_function": "nvmlErrorString",
        "printed_forms": ["Failed to initialize NVML: <message>", "NVMLError_X: <pynvml message>",
                          "NVML_ERROR_X"],
    }
    _enum.emit(_enum.document("nvmlReturn_t", source, entries, **extra))


if __name__ == "__main__":
    main()
