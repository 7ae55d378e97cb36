"""The host side's standard wordings: the dynamic loader (glibc ld.so and strerror), kmod's
modprobe/insmod, the NVIDIA kernel module's NVRM messages (open kernel modules source and
the proprietary nv-kernel.o_binary), and nvidia-container-cli's error stages. Each entry's
``message`` is copied by this script out of the named file (a binary's string table or a
source file's C literals); ``meaning`` is ours, one line, for the diagnosis tables.

    python bench/enumerations/extract_host_messages.py \
        --ld-so /lib64/ld-linux-x86-64.so.2 --libc-version "Debian libc6 2.36-9+deb12u14" \
        --kmod-repo KMOD_CHECKOUT --kmod-commit C \
        --nvidia-open-repo OPEN_GPU_KERNEL_MODULES_CHECKOUT --nvidia-open-commit C \
        --nv-kernel-blob .../nvidia-current-555.58.02/nvidia/nv-kernel.o_binary \
        --nv-kernel-package "Debian experimental non-free nvidia-kernel-dkms 555.58.02-4" \
        > host_messages.json

The loader's composed line ("<name>: cannot open shared object file: <strerror>") is observed
by asking this machine's loader for a library that does not exist (ctypes.CDLL).
nvidia-container-cli's stages are not extracted here: its repository is too large to fetch;
they were read from NVIDIA/libnvidia-container src/cli/configure.c (commit in CONTAINER_CLI)
and are carried as data below.
"""
from __future__ import annotations

import argparse
import ctypes
import errno
import os
import re
from pathlib import Path

import _enum

LOADER_KEYS = [
    ("cannot open shared object file", "a library (or one it needs) is not on the loader's search path "
     "(LD_LIBRARY_PATH, ld.so.cache, RUNPATH); for CUDA libraries: the toolkit/wheel that ships it is not installed "
     "or not found"),
    ("version `%s' not found (required by %s)", "a library was built against a newer symbol version (e.g. GLIBC_2.xx, "
     "GLIBCXX_3.4.xx) than the one installed provides"),
    ("no version information available (required by %s)", "warning: a library lacks symbol-version data the binary "
     "expected; usually harmless, sometimes a mismatched copy of the library"),
    ("wrong ELF class: ELFCLASS32", "a 32-bit library was found where a 64-bit one is needed"),
    ("undefined symbol: %s%s%s", "a library loaded but lacks a symbol the caller needs: mismatched library versions "
     "(e.g. a CUDA library older than the framework was built for)"),
    ("invalid ELF header", "the file named is not a shared library (broken download, a linker script or text file)"),
    ("file too short", "the file named is truncated or empty"),
]

ERRNOS = [
    ("ENOENT", "the file does not exist"),
    ("EKEYREJECTED", "the kernel refused a module whose signature is not trusted (Secure Boot)"),
    ("ENOKEY", "the kernel needs a signed module and found no key for it (Secure Boot / lockdown)"),
    ("ENOEXEC", "the module or binary format is wrong (built for another kernel or architecture)"),
    ("EPERM", "not permitted (not root, or lockdown)"),
    ("ENODEV", "no such device (module loaded but no matching hardware)"),
]

KMOD = [
    ("tools/modprobe.c", "Module %s not found in directory %s", "FATAL",
     "no module of that name is installed for the running kernel (driver not built for this kernel: "
     "DKMS build failed, kernel upgraded, or driver not installed)"),
    ("tools/modprobe.c", "could not insert '%s': %s", "ERROR",
     "the kernel refused the module; the text after the colon is strerror (e.g. 'Key was rejected by service' "
     "with Secure Boot, 'No such device' without a supported GPU)"),
    ("tools/modprobe.c", "could not insert '%s': Unknown symbol in module, ", "ERROR",
     "the module does not match the running kernel (or its dependencies are missing); dmesg names the symbol"),
    ("tools/modprobe.c", "could not insert '%s': Module already in kernel", "ERROR",
     "the module is already loaded"),
    ("tools/insmod.c", "could not insert module %s: %s", "ERROR", "insmod's form of the same refusal"),
    ("tools/insmod.c", "Invalid module format", None, "module built for another kernel (vermagic mismatch)"),
]

NVRM_OPEN = [
    ("kernel-open/nvidia/nv.c", "NVRM: The NVIDIA probe routine was not called",
     "another driver (e.g. nouveau) bound the GPU before nvidia.ko; blacklist it and rebuild the initramfs"),
    ("kernel-open/nvidia/nv.c", "NVRM: This can occur when another driver was loaded",
     "continuation of the previous message"),
    ("kernel-open/nvidia/nv.c", "NVRM: No NVIDIA devices probed.", "nvidia.ko found no GPU it could take"),
    ("kernel-open/nvidia/nv.c", "NVRM: The NVIDIA probe routine failed", "probing a GPU failed; see the lines before it"),
    ("src/nvidia/arch/nvalloc/unix/src/osapi.c", "NVRM: API mismatch: the client '%s'",
     "user-space driver libraries and the loaded kernel module are different versions (driver upgraded without "
     "reboot/reload); reload the module or reboot"),
    ("src/nvidia/arch/nvalloc/unix/src/osapi.c", "fallen off the bus and is not responding",
     "the GPU stopped answering on PCIe (see Xid 79)"),
    ("src/nvidia/arch/nvalloc/unix/src/osapi.c", "installed in this system is not supported by open",
     "the open kernel modules need a GPU with GSP (Turing or newer); use the proprietary module"),
    # issue 29: the module's other error-level messages that name a cause (nv_printf(NV_DBG_ERRORS, ...),
    # NV_DEV_PRINTF(NV_DBG_ERRORS, nv, ...) printed as "NVRM: GPU <pci>: <text>", and the RM's
    # NV_PRINTF(LEVEL_ERROR, ...) printed as "NVRM: <function>: <text>"); debug traces left out
    ("src/nvidia/arch/nvalloc/unix/src/osapi.c", "installed in this vGPU host system is not supported by",
     "the open kernel modules do not support this GPU as a vGPU host; use the proprietary module"),
    ("kernel-open/nvidia/nv.c", "NVRM: No NVIDIA GPU found.", "nvidia.ko loaded but found no NVIDIA GPU on the PCI bus"),
    ("kernel-open/nvidia/nv.c", "NVRM: No NVIDIA PCI devices found.", "nvidia.ko found no NVIDIA PCI device"),
    ("kernel-open/nvidia/nv.c", "NVRM: Try unloading the conflicting kernel module",
     "continuation of 'The NVIDIA probe routine was not called': another driver holds the GPU"),
    ("kernel-open/nvidia/nv.c", "NVRM: None of the NVIDIA devices were initialized.",
     "every GPU failed to probe; see the lines before it"),
    ("kernel-open/nvidia/nv.c", "No interrupts of any type are available. Cannot use this GPU.",
     "the GPU has no interrupt (no MSI/MSI-X and no legacy IRQ assigned by the firmware)"),
    ("kernel-open/nvidia/nv.c", "Tried to get IRQ %d, but another driver",
     "the GPU's legacy IRQ is held, unshared, by another driver"),
    ("kernel-open/nvidia/nv.c", "rm_init_adapter failed, device minor number %d",
     "the resource manager could not initialise the GPU (RmInitAdapter); the lines before it say why"),
    ("kernel-open/nvidia/nv-pci.c", "NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:",
     "the GPU's PCI BAR has no valid address: the firmware/hypervisor did not assign its MMIO space"),
    ("kernel-open/nvidia/nv-pci.c", "NVRM: No address space to allocate resized BAR1.",
     "no MMIO space for a resized BAR1 (Above 4G decoding / Resizable BAR / 64-bit MMIO window too small)"),
    ("kernel-open/nvidia/nv-pci.c", "NVRM: FATAL: Failed to re-allocate BAR1.",
     "BAR1 could not be placed again after resizing; the MMIO window is too small"),
    ("kernel-open/nvidia/nv-pci.c", "NVRM: Fatal Error while attempting to resize PCIe BARs.",
     "resizing the GPU's BARs failed (MMIO space)"),
    ("kernel-open/nvidia/nv-pci.c", "NVRM: Can't find an IRQ for your NVIDIA card!",
     "the firmware assigned the GPU no IRQ; check the BIOS settings"),
    ("kernel-open/nvidia/nv-pci.c", "NVRM: request_mem_region failed for",
     "another driver (nouveau, a framebuffer driver) claimed the GPU's registers"),
    ("kernel-open/nvidia/nv-pci.c", "since IOMMU is not present on the system.",
     "an SR-IOV virtual function needs the IOMMU enabled (intel_iommu=on / amd_iommu=on, VT-d/AMD-Vi in the BIOS)"),
    ("kernel-open/nvidia/os-interface.c", "NVRM: requires auto onlining mode online_movable enabled in",
     "a coherent-memory GPU (Grace Hopper/Blackwell) needs memory auto-onlining set to online_movable"),
    ("src/nvidia/arch/nvalloc/unix/src/osinit.c", "RmInitAdapter failed! (0x%x:0x%x:%d)",
     "the resource manager could not initialise the GPU; the lines before it say why"),
    ("src/nvidia/arch/nvalloc/unix/src/osinit.c", "GPU has fallen off the bus.",
     "the GPU stopped answering on PCIe"),
    ("src/nvidia/arch/nvalloc/unix/src/osinit.c", "Cannot initialize GSP firmware RM",
     "the GSP firmware failed to boot on this GPU"),
    ("src/nvidia/arch/nvalloc/unix/src/osinit.c", "GSP-RM proxy boot command failed.",
     "the GSP firmware failed to boot (proxy boot)"),
    ("src/nvidia/arch/nvalloc/unix/src/osinit.c", "No firmware image found",
     "the GSP firmware file (/lib/firmware/nvidia/<version>/gsp_*.bin) of this driver version was not found"),
    ("src/nvidia/arch/nvalloc/unix/src/osinit.c", "GPU does not have the necessary power cables connected.",
     "the GPU's auxiliary power connectors are not connected (or the PSU does not deliver on them)"),
]

# How NV_DEV_PRINTF / NV_PRINTF / nvErrorLog_va messages are printed: the prefix the literal lacks.
NVRM_PREFIXES = [
    ("NV_DEV_PRINTF", "NVRM: GPU %04x:%02x:%02x.%x: "),
    ("nvErrorLog_va", "NVRM: Xid (PCI:%s): %d, %s, "),
    ("NV_PRINTF", "NVRM: %s: "),
]
PREFIX_SOURCES = {
    "NV_DEV_PRINTF": 'src/nvidia/arch/nvalloc/unix/include/os-interface.h: nv_printf(debuglevel, "NVRM: GPU " '
                     'NV_PCI_DEV_FMT ": " format, ...)',
    "nvErrorLog_va": "an Xid event: \"NVRM: Xid (PCI:<bus>): <xid>, pid=..., name=..., <text>\"",
    "NV_PRINTF": "src/nvidia/inc/libraries/utils/nvprintf.h NV_PRINTF_ADD_PREFIX: \"NVRM: \" + the function's name",
}

# The Linux kernel's own lines around a failed nvidia probe (read through a code index in
# torvalds/linux; carried as data): the driver core's probe warning (before Linux 6.9 and after)
# and the firmware loader's warning when the GSP firmware file is missing.
LINUX = [
    ("drivers/base/dd.c (call_driver_probe, older kernels: pr_warn)", "%s: probe of %s failed with error %d",
     "the kernel's note that a driver's probe failed (for nvidia: the NVRM lines before it say why)", "nvidia"),
    ("drivers/base/dd.c (call_driver_probe, newer kernels: dev_err)", "probe with driver %s failed with error %d",
     "the kernel's note that a driver's probe failed (for nvidia: the NVRM lines before it say why)", "nvidia"),
    ("drivers/base/firmware_loader/main.c (_request_firmware) + kernel-open/common/inc/nv-firmware.h",
     "Direct firmware load for nvidia/%s/gsp_%s.bin failed with error %d",
     "the kernel's firmware loader found no GSP firmware file of this driver version under /lib/firmware "
     "(the kernel's format \"Direct firmware load for %s failed with error %d\" filled with nvidia.ko's "
     "firmware name, nvidia/<version>/gsp_<chip>.bin)", None),
]

NVRM_BLOB = [
    ("supported through the NVIDIA %s Legacy drivers",
     "the GPU is only supported by a legacy driver branch (e.g. 470.xx); install that branch"),
    ("You can try the NVIDIA %s Legacy drivers", "as above, for a GPU the driver cannot name"),
    ("NVRM: API mismatch: the client has the version %s",
     "user-space driver libraries and the loaded kernel module are different versions; reload the module or reboot"),
    ("is not supported by the\nNVRM: NVIDIA %s driver release",
     "the GPU is not supported by this driver release (too new or too old for it)"),
]

# TensorFlow/JAX (XLA's TSL) wrap a dlopen failure so (read from openxla/xla
# xla/tsl/platform/default/dso_loader.cc at the commit below, GetDsoHandle; carried as data).
DSO_LOADER = {
    "repository": "openxla/xla", "path": "xla/tsl/platform/default/dso_loader.cc (GetDsoHandle)",
    "commit": "13da2f0c462fd4ac86ae3bc9f4a8ceb2aed119df",
    "message": "Could not load dynamic library '%s'; dlerror: %s",
    "suffix": "; LD_LIBRARY_PATH: %s",
    "meaning": "TensorFlow/XLA could not dlopen a CUDA library (libcudart, libcublas, libcudnn, libnccl, libnvinfer, ...); "
               "the dlerror part is the loader's own line",
}

# nvidia-container-cli configure's stages, as its warnx()/errx() calls print them (read from
# NVIDIA/libnvidia-container src/cli/configure.c at CONTAINER_CLI["commit"]; warnx prefixes the
# program name, "nvidia-container-cli: ").
CONTAINER_CLI = {
    "repository": "NVIDIA/libnvidia-container",
    "path": "src/cli/configure.c (configure_command, parser)",
    "commit": "09df17a2424704c1e4af310d3ce51fe475ba292a",
    "stages": [
        ("input error: %s", "bad command-line input to nvidia-container-cli (from the runtime hook)"),
        ("permission error: %s", "could not set the capabilities it needs (not root, or a restricted runtime)"),
        ("initialization error: %s", "libnvidia-container could not start: typically the driver's libraries "
         "(libnvidia-ml.so.1) are missing or the kernel module is not loaded"),
        ("container error: %s", "could not enter or set up the container's namespaces/rootfs"),
        ("detection error: %s", "querying the driver or GPUs failed (NVML errors appear here)"),
        ("device error: %s", "a requested GPU (NVIDIA_VISIBLE_DEVICES / --gpus) does not exist"),
        ("requirement error: %s", "the image's NVIDIA_REQUIRE_* constraint (e.g. cuda>=12.4) is not met by the host driver"),
        ("mount error: %s", "mounting the driver files or device nodes into the container failed"),
        ("ldcache error: %s", "running ldconfig inside the container failed"),
    ],
}


def c_literals(text: str) -> list[tuple[int, str]]:
    """Each run of adjacent C string literals (a printf format split over lines), joined, with
    the line it starts on."""
    runs = []
    for match in re.finditer(r'(?:"(?:[^"\\\n]|\\.)*"\s*)+', text):
        parts = re.findall(r'"((?:[^"\\\n]|\\.)*)"', match.group(0))
        joined = "".join(_enum.c_unescape(p) for p in parts)
        runs.append((text.count("\n", 0, match.start()) + 1, joined))
    return runs


def find_literal(text: str, key: str) -> tuple[int, str]:
    hits = [(line, s) for line, s in c_literals(text) if key in s]
    if not hits:
        raise SystemExit(f"{key!r} not found")
    return hits[0]


def binary_strings(path: str) -> list[str]:
    data = Path(path).read_bytes()
    return [s.decode("ascii") for s in re.findall(rb"[\x20-\x7e\n\t]{6,}", data)]


def git_file(repo: str, path: str) -> str:
    return (Path(repo) / path).read_text(errors="replace")


def observed_dlerror() -> str:
    name = "libenvcheck-does-not-exist.so.1"
    try:
        ctypes.CDLL(name)
    except OSError as exc:
        return str(exc)
    raise SystemExit("the loader found a library that should not exist")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ld-so", required=True)
    parser.add_argument("--libc-version", required=True)
    parser.add_argument("--kmod-repo", required=True)
    parser.add_argument("--kmod-commit", required=True)
    parser.add_argument("--nvidia-open-repo", required=True)
    parser.add_argument("--nvidia-open-commit", required=True)
    parser.add_argument("--nvidia-open-version", default="595.45.04")
    parser.add_argument("--nv-kernel-blob", required=True)
    parser.add_argument("--nv-kernel-package", required=True)
    args = parser.parse_args()

    entries = []
    ld_strings = binary_strings(args.ld_so)
    for key, meaning in LOADER_KEYS:
        if not any(key in s for s in ld_strings):
            raise SystemExit(f"{key!r} not in {args.ld_so}")
        entries.append({"name": f"ld.so: {key}", "family": "loader", "message": key, "meaning": meaning,
                        "source": {"package": args.libc_version, "file": args.ld_so, "how": "string table of the binary"}})
    entries.append({"name": "ld.so: dlerror composed", "family": "loader", "message": observed_dlerror(),
                    "printed_form": "<library>: cannot open shared object file: <strerror(errno)>",
                    "meaning": "the form every dlopen failure takes (Python's OSError, TensorFlow's 'dlerror:', "
                               "'Failed to dlopen'); the library name is the one asked for",
                    "source": {"package": args.libc_version, "how": "observed: ctypes.CDLL of a missing library on this machine"}})
    for name, meaning in ERRNOS:
        number = getattr(errno, name)
        entries.append({"name": f"strerror({name})", "family": "errno", "number": number,
                        "message": os.strerror(number), "meaning": meaning,
                        "source": {"package": args.libc_version, "how": "os.strerror on this machine"}})

    for path, key, prio, meaning in KMOD:
        line, text = find_literal(git_file(args.kmod_repo, path), key)
        entry = {"name": f"kmod: {key.rstrip(', ')}", "family": "kmod", "message": text.rstrip("\n"),
                 "meaning": meaning,
                 "source": {"repository": "kmod-project/kmod", "path": path, "line": line, "commit": args.kmod_commit}}
        if prio:
            tool = "modprobe" if path.endswith("modprobe.c") else "insmod"
            entry["printed_form"] = f"{tool}: {prio}: {text.rstrip(chr(10))}"
        entries.append(entry)

    for path, key, meaning in NVRM_OPEN:
        # NvU64_fmtu/NvU64_fmtx (nvtypes.h: "llu"/"llx") spliced between literals: read as the format they make
        source = re.sub(r'"\s*NvU64_fmt([ux])\s*"', r"ll\1", git_file(args.nvidia_open_repo, path))
        line, text = find_literal(source, key)
        entry = {"name": f"NVRM (open): {key}", "family": "nvrm", "message": text.rstrip("\n"),
                 "meaning": meaning,
                 "source": {"repository": "NVIDIA/open-gpu-kernel-modules", "path": path, "line": line,
                            "commit": args.nvidia_open_commit, "version": args.nvidia_open_version}}
        before = "\n".join(source.split("\n")[max(0, line - 4):line])
        if not text.startswith("NVRM:"):  # the macro adds the prefix: message is the printed format
            for macro, prefix in NVRM_PREFIXES:
                if macro in before:
                    entry["message"] = prefix + text.rstrip("\n")
                    entry["literal"] = text.rstrip("\n")
                    entry["printed_by"] = macro + ": " + PREFIX_SOURCES[macro]
                    break
        entries.append(entry)
    for path, text, meaning, _requires in LINUX:
        entries.append({"name": f"linux: {text}", "family": "kernel", "message": text, "meaning": meaning,
                        "printed_form": ("<driver>: " if text.startswith("%s: probe") else "<driver> <device>: ")
                        + text.removeprefix("%s: "),
                        "source": {"repository": "torvalds/linux", "path": path,
                                   "how": "read through the code index, carried as data in this script"}})
    blob = binary_strings(args.nv_kernel_blob)
    for key, meaning in NVRM_BLOB:
        hits = [s for s in blob if key in s]
        if not hits:
            raise SystemExit(f"{key!r} not in {args.nv_kernel_blob}")
        entries.append({"name": f"NVRM (proprietary): {key}", "family": "nvrm", "message": hits[0].rstrip("\n"),
                        "meaning": meaning,
                        "source": {"package": args.nv_kernel_package, "file": "nvidia/nv-kernel.o_binary",
                                   "how": "string table of the binary"}})

    entries.append({"name": "tsl dso_loader: Could not load dynamic library", "family": "loader",
                    "message": DSO_LOADER["message"],
                    "printed_form": DSO_LOADER["message"] + "[" + DSO_LOADER["suffix"] + " when LD_LIBRARY_PATH is set]",
                    "meaning": DSO_LOADER["meaning"],
                    "source": {"repository": DSO_LOADER["repository"], "path": DSO_LOADER["path"],
                               "commit": DSO_LOADER["commit"],
                               "how": "read through the code index, carried as data in this script"}})
    for text, meaning in CONTAINER_CLI["stages"]:
        entries.append({"name": f"nvidia-container-cli: {text.split(':')[0]}", "family": "container",
                        "message": text, "printed_form": f"nvidia-container-cli: {text}", "meaning": meaning,
                        "source": {"repository": CONTAINER_CLI["repository"], "path": CONTAINER_CLI["path"],
                                   "commit": CONTAINER_CLI["commit"],
                                   "how": "read through the code index, carried as data in this script"}})

    doc = {"schema": _enum.SCHEMA, "name": "host_messages",
           "source": {"url": None, "repository": None, "path": None, "commit": None,
                      "version": "several; each entry names its own source"},
           "note": "message: copied from the source named; meaning: envcheck's one-line reading of it",
           "entries": entries}
    _enum.emit(doc)


if __name__ == "__main__":
    main()
