"""Xid errors: what each number means for a node, and the ones the kernel logged since boot.

The NVIDIA driver logs every Xid to the kernel log as ``NVRM: Xid (PCI:0000:3b:00): 79,
pid=..., GPU has fallen off the bus.``; NVML delivers the same numbers as
``nvmlEventTypeXidCriticalError`` events while a watcher is registered. Both are classified
here with one table (NVIDIA's Xid catalogue, https://docs.nvidia.com/deploy/xid-errors/, and
its health validation's Xid checks): hardware and firmware faults make the GPU not-ready
(drain, reset, replace), application faults (13, 31, 43) are info, the rest info with a
pointer to the catalogue.

The kernel log is ``/dev/kmsg``, read without blocking (what ``dmesg`` reads); where it can't be
read (``kernel.dmesg_restrict=1`` without CAP_SYSLOG, a container without it) the answer is
None with the reason, never "no Xid". Test seam: ``ENVCHECK_TEST_KERNEL_LOG`` names a text file
read instead of the kernel log (the kernel's own lines, any prefix); it is not a user option.
"""
from __future__ import annotations

import errno
import os
from .records import record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (records.py says why)
if TYPE_CHECKING:
    from typing import Mapping

KERNEL_LOG_SEAM = "ENVCHECK_TEST_KERNEL_LOG"
KMSG = "/dev/kmsg"
CATALOGUE = "https://docs.nvidia.com/deploy/xid-errors/"

_DRAIN_RESET = "drain the node and reset the GPU (`sudo nvidia-smi -r -i {i}`) or reboot"
_REPLACE = "; if it happens again on this GPU, have it reseated or replaced"
# Xid -> (effect, what it is, action). {i} is the GPU's NVML index.
CLASSES: dict[int, tuple[str, str, str]] = {
    48: ("not-ready", "a double-bit (uncorrectable) ECC error in GPU memory",
         _DRAIN_RESET + " so the bad row is retired or remapped" + _REPLACE),
    63: ("not-ready", "a page retirement or row remapping was recorded after an ECC error; it "
         "takes effect at the next GPU reset", _DRAIN_RESET + " to apply it"),
    64: ("not-ready", "recording a page retirement or row remapping failed",
         _DRAIN_RESET + "; if it repeats, have the GPU replaced"),
    74: ("not-ready", "an NVLink error", _DRAIN_RESET + "; check the NVLink bridges or NVSwitch "
         "and run `nvidia-smi nvlink -s -i {i}`" + _REPLACE),
    79: ("not-ready", "the GPU has fallen off the bus (stopped answering on PCIe)",
         "drain the node and reboot it; check the GPU's power cables, seating and temperature"
         + _REPLACE),
    92: ("not-ready", "a high single-bit ECC error rate", _DRAIN_RESET + _REPLACE),
    94: ("not-ready", "a contained ECC error: the application using that memory was stopped",
         _DRAIN_RESET + " so the row is remapped" + _REPLACE),
    95: ("not-ready", "an uncontained ECC error: every application on the GPU was affected",
         _DRAIN_RESET + " so the row is remapped" + _REPLACE),
    119: ("not-ready", "a GSP firmware RPC timeout", _DRAIN_RESET + "; update the driver if it "
          "repeats"),
    120: ("not-ready", "a GSP firmware error", _DRAIN_RESET + "; update the driver if it repeats"),
    13: ("info", "an application's kernel faulted (graphics engine exception: an illegal "
         "instruction or out-of-range access); the GPU itself is fine",
         "debug the program that ran (`compute-sanitizer`, CUDA_LAUNCH_BLOCKING=1)"),
    31: ("info", "an application's kernel touched memory it does not own (MMU fault); the GPU "
         "itself is fine", "debug the program that ran (`compute-sanitizer`, "
         "CUDA_LAUNCH_BLOCKING=1)"),
    43: ("info", "the GPU stopped an application's work after a fault in it; the GPU itself "
         "is fine", "debug the program that ran; nothing to do on the node"),
}
CRITICAL = frozenset(code for code, (effect, _, _) in CLASSES.items() if effect == "not-ready")

_LINE = (r"NVRM: Xid \((?:PCI:)?(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):"
         r"([0-9a-fA-F]{2})(?:\.[0-9a-fA-F])?\): (\d{1,4})\b")  # compiled on first use


def classify(code: int, index: int | None) -> tuple[str, str, str]:
    """(effect, cause, action) of Xid ``code`` on the GPU of NVML index ``index``."""
    effect, cause, action = CLASSES.get(code, (
        "info", f"Xid {code}, not one envcheck classes as a node fault",
        f"look it up in NVIDIA's Xid catalogue ({CATALOGUE}); if it repeats on this GPU, run "
        "`dcgmi diag -r 3`"))
    return effect, cause, action.replace("{i}", "N" if index is None else str(index))


@record(frozen=True)
class KernelXid:
    """One ``NVRM: Xid`` line: the GPU's PCI address as the kernel wrote it, the number and
    the line itself (without the kernel's record prefix)."""
    pci: str  # "0000:3b:00", lower case: domain:bus:device
    code: int
    line: str


def pci_key(bus_id: str | None) -> str | None:
    """NVML's "00000000:3B:00.0" (or the kernel's "0000:3b:00") as "0000:3b:00"."""
    if not bus_id:
        return None
    parts = bus_id.lower().split(".")[0].split(":")
    if len(parts) == 2:
        parts = ["0000", *parts]
    if len(parts) != 3:
        return None
    return f"{parts[0][-4:]:0>4}:{parts[1]:0>2}:{parts[2]:0>2}"


def parse(lines: list[str]) -> list[KernelXid]:
    found = []
    for line in lines:
        match = _search(line) if "Xid" in line else None
        if match:
            domain, bus, device, code = match.groups()
            found.append(KernelXid(f"{(domain or '0000')[-4:]}:{bus}:{device}".lower(),
                                   int(code), line[match.start():].strip()))
    return found


def _search(line: str):
    import re  # only for a line naming an Xid: the gate's fast path imports no re otherwise

    return re.search(_LINE, line)


def kernel_xids(environ: Mapping[str, str]) -> tuple[list[KernelXid] | None, str | None]:
    """The Xid lines the kernel logged since boot (as far as its ring buffer reaches), or None
    and why the log can't be read."""
    seam = environ.get(KERNEL_LOG_SEAM)
    try:
        if seam:
            with open(seam, encoding="utf-8", errors="replace") as f:
                return parse(f.read().splitlines()), None
        return parse(_read_kmsg()), None
    except OSError as exc:
        return None, _why_unreadable(exc, seam or KMSG)


def _read_kmsg() -> list[str]:
    """Every record in the kernel's ring buffer, read without blocking: one record per read;
    EAGAIN at the end; EPIPE where a record was overwritten while reading (skipped)."""
    fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    records = []
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:
                continue
            if not record:
                break
            if b"Xid" in record:
                records.append(record.decode("utf-8", errors="replace"))
    finally:
        os.close(fd)
    return records


def _why_unreadable(exc: OSError, path: str) -> str:
    if exc.errno in (errno.EPERM, errno.EACCES):
        return (f"{path} is not readable by this user (kernel.dmesg_restrict=1): run as root "
                "or with CAP_SYSLOG, or look yourself: `sudo dmesg | grep -i xid`")
    if exc.errno == errno.ENOENT:
        return f"{path} does not exist here (a container without the kernel log?)"
    return f"{path} could not be read: {exc.strerror or exc}"
