"""Merge the schedulers' GPU-allocation wordings (issue 29) into platform_messages.json and tie
each to its cause in diagnose_codes.json.

The wordings are copied by hand from the sources (below, ``SLURM``, ``DEVICE_PLUGIN`` and
``KUBELET``); this script checks each against the source itself where a clone is at hand, finds
its line, notes which releases hold it (``seen_in``), and writes the entries:

    python bench/enumerations/extract_scheduler_messages.py \
        --slurm /path/to/SchedMD/slurm.git --device-plugin /path/to/NVIDIA/k8s-device-plugin.git

Without a clone (``--slurm``/``--device-plugin`` omitted) the entries are written as given,
with the permalink to the file at the commit and no line. The kubelet's wordings were read
through a code index (kubernetes/kubernetes is too large to clone here), at the commits given.

Formats follow printf: Slurm's ``%"PRIu64"`` is written ``%lu``, ``%pJ``/``%ps``/``%m`` as ``%s``;
Go's ``%v``/``%q``/``%w`` as ``%s``. Nothing is downloaded.
"""
from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import _enum

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = ROOT / "envcheck/data/enumerations/platform_messages.json"
CODES = ROOT / "envcheck/data/diagnose_codes.json"

SLURM_REPO = "SchedMD/slurm"
SLURM_TAG = "slurm-25-11-7-1"
SLURM_COMMIT = "f56e676bbd3e7cccbdd7c505c030c62bb983ebee"
SLURM_TAGS = ["slurm-22-05-11-1", "slurm-23-02-8-1", "slurm-23-11-11-1", "slurm-24-05-8-1",
              "slurm-24-11-7-1", "slurm-25-11-7-1"]
# where a file lived before src/interfaces/ (22.05 had src/common/gres.c, src/common/gpu.c)
SLURM_PATHS = {
    "gres.c": ["src/interfaces/gres.c", "src/common/gres.c"],
    "gpu.c": ["src/interfaces/gpu.c", "src/common/gpu.c"],
    "slurm_errno.c": ["src/common/slurm_errno.c"],
    "gres_stepmgr.c": ["src/stepmgr/gres_stepmgr.c", "src/slurmctld/gres_ctld.c", "src/interfaces/gres.c"],
    "gres_gpu.c": ["src/plugins/gres/gpu/gres_gpu.c"],
    "gpu_nvml.c": ["src/plugins/gpu/nvml/gpu_nvml.c"],
}

DP_REPO = "NVIDIA/k8s-device-plugin"
DP_TAG = "v0.20.0"
DP_COMMIT = "1b826acc6af3079d8923bac395c3124b8861a9a6"
DP_TAGS = ["v0.14.5", "v0.15.1", "v0.16.2", "v0.17.4", "v0.18.2", "v0.19.3", "v0.20.0"]

K8S_REPO = "kubernetes/kubernetes"
K8S_MANAGER = ("pkg/kubelet/cm/devicemanager/manager.go", "7510f32987feb7efbaced9aec1ca15303dea252b")
K8S_HANDLER = ("pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go", "f449697457334218e8285afe52ea74c4d67f8726")
K8S_TYPES = ("pkg/kubelet/cm/devicemanager/types.go", "28f88c77b624e791a77e34a1bee006efccda3ae2")

# (name, file, needle in the source, message as printed, cause, requires, meaning)
SLURM = [
    # slurm_errno.c: the ESLURM_* strings that sbatch/srun/salloc print ("error: ... failed: <text>")
    ("slurm: Invalid Trackable RESource (TRES) specification", "slurm_errno.c",
     '"Invalid Trackable RESource (TRES) specification"', "Invalid Trackable RESource (TRES) specification",
     "slurm-invalid-gres-request", None,
     "ESLURM_INVALID_TRES: a --tres-per-task/--gpus-style request names a TRES the cluster does not define, or cannot be parsed"),
    ("slurm: Invalid GRES specification (with and without type identification)", "slurm_errno.c",
     '"Invalid GRES specification (with and without type identification)"',
     "Invalid GRES specification (with and without type identification)",
     "slurm-gpu-options-inconsistent", None,
     "ESLURM_INVALID_GRES_TYPE: the job asks for the same GRES both with a type and without one (e.g. --gres=gpu:1,gpu:a100:1)"),
    ("slurm: Requested GRES option unsupported by configured SelectType plugin", "slurm_errno.c",
     '"Requested GRES option unsupported by configured SelectType plugin"',
     "Requested GRES option unsupported by configured SelectType plugin",
     "slurm-gres-needs-cons-tres", None,
     "ESLURM_UNSUPPORTED_GRES: --gpus, --gpus-per-task, --cpus-per-gpu ... need SelectType=select/cons_tres"),
    ("slurm: Insufficient GRES available in allocation", "slurm_errno.c",
     '"Insufficient GRES available in allocation"', "Insufficient GRES available in allocation",
     "slurm-step-gres-exceeds-allocation", None,
     "ESLURM_INSUFFICIENT_GRES: a job step (srun) asks for more GPUs than its job allocation holds"),
    ("slurm: RestrictedCoresPerGPU: No GPUs configured on node", "slurm_errno.c",
     '"RestrictedCoresPerGPU: No GPUs configured on node"', "RestrictedCoresPerGPU: No GPUs configured on node",
     "slurm-gres-count-mismatch", None,
     "ESLURM_RES_CORES_PER_GPU_NO: slurm.conf gives the node RestrictedCoresPerGPU but slurmd registered no GPUs for it"),
    # gres.c: slurmd reading gres.conf, slurmctld validating a node's registration
    ("slurmd: Waiting for gres.conf file", "gres.c", '"Waiting for gres.conf file %s"',
     "Waiting for gres.conf file %s", "slurm-gres-device-file-missing", None,
     "a gres.conf File= (e.g. /dev/nvidia0) does not exist yet; slurmd waits 20 s, then dies with can't stat gres.conf file"),
    ("slurmd: can't parse File=", "gres.c", '"can\'t parse File=%s"', "can't parse File=%s",
     "slurm-gres-conf-syntax", None, "a gres.conf File= value is not a valid file name or range (/dev/nvidia[0-3])"),
    ("slurmd: unknown autodetect flag", "gres.c", '"unknown autodetect flag \'%s\'"', "unknown autodetect flag '%s'",
     "slurm-gres-conf-syntax", None, "gres.conf AutoDetect= names no known mechanism (nvml, nvidia, rsmi, oneapi, nrt, off)"),
    ("slurmd: gres.conf duplicate node-local AutoDetect", "gres.c",
     '"gres.conf: duplicate node-local AutoDetect specification does not match the first"',
     "gres.conf: duplicate node-local AutoDetect specification does not match the first",
     "slurm-gres-conf-syntax", None, "two NodeName lines of gres.conf give the same node different AutoDetect= values"),
    ("slurmd: In-line AutoDetect requires NodeName", "gres.c",
     '"gres.conf: In-line AutoDetect requires NodeName to take effect"',
     "gres.conf: In-line AutoDetect requires NodeName to take effect",
     "slurm-gres-conf-syntax", None, "a gres.conf line sets AutoDetect= together with Name= but without NodeName="),
    ("slurmd: Invalid GRES data, no type name", "gres.c", '"Invalid GRES data, no type name (%s)"',
     "Invalid GRES data, no type name (%s)", "slurm-gres-conf-syntax", None,
     "a gres.conf Type= is empty"),
    ("slurmd: Invalid GRES data for CPUs", "gres.c", '"Invalid GRES data for %s, %s=%s (only %u CPUs are available)"',
     "Invalid GRES data for %s, %s=%s (only %u CPUs are available)", "slurm-gres-conf-syntax", None,
     "a gres.conf Cores=/CPUs= names CPUs beyond what the node has"),
    ("slurmd: File and MultipleFiles mutually exclusive", "gres.c",
     '"File and MultipleFiles options are mutually exclusive"', "File and MultipleFiles options are mutually exclusive",
     "slurm-gres-conf-syntax", None, "a gres.conf line gives both File= and MultipleFiles="),
    ("slurmd: MultipleFiles does not contain multiple files", "gres.c",
     '"MultipleFiles does not contain multiple files. Use File instead"',
     "MultipleFiles does not contain multiple files. Use File instead", "slurm-gres-conf-syntax", None,
     "a gres.conf MultipleFiles= names one file"),
    ("slurmd: Invalid GRES record, invalid count", "gres.c", '"Invalid GRES record for %s, invalid count %s"',
     "Invalid GRES record for %s, invalid count %s", "slurm-gres-conf-syntax", None,
     "a gres.conf Count= is not a number"),
    ("slurmd: Invalid GRES record, count does not match File", "gres.c",
     '"Invalid GRES record for %s, count does not match File value"',
     "Invalid GRES record for %s, count does not match File value", "slurm-gres-conf-syntax", None,
     "a gres.conf Count= differs from the number of devices its File= names"),
    ("slurmd: GRES has invalid count value", "gres.c", '"GRES %s has invalid count value %"',
     "GRES %s has invalid count value %lu", "slurm-gres-conf-syntax", None, "a gres.conf Count= is out of range"),
    ("slurmd: Ignoring gres.conf record, invalid name", "gres.c", '"Ignoring gres.conf record, invalid name: %s"',
     "Ignoring gres.conf record, invalid name: %s", "slurm-grestypes-missing", None,
     "a gres.conf Name= is not one of slurm.conf's GresTypes (gres.conf Name=gpu without GresTypes=gpu)"),
    ("slurmd: some GRES in slurm.conf have a type while others do not", "gres.c",
     '"%s: Some %s GRES in slurm.conf have a type while others do not',
     "%s: Some %s GRES in slurm.conf have a type while others do not", "slurm-gres-conf-syntax", None,
     "slurm.conf's Gres= for the node mixes typed (gpu:a100:2) and untyped (gpu:2) counts"),
    ("slurmd: some gres.conf records have File while others do not", "gres.c",
     '"gres.conf for %s, some records have \\"File\\" specification while others do not"',
     "gres.conf for %s, some records have \"File\" specification while others do not", "slurm-gres-conf-syntax", None,
     "gres.conf lines of one GRES name disagree: some give File=, some do not"),
    ("slurmd: some gres.conf records have Type while others do not", "gres.c",
     '"gres.conf for %s, some records have \\"Type=\\" specification while others do not"',
     "gres.conf for %s, some records have \"Type=\" specification while others do not", "slurm-gres-conf-syntax", None,
     "gres.conf lines of one GRES name disagree: some give Type=, some do not"),
    ("slurmd: not a valid character or block device", "gres.c",
     '"%s is not a valid character or block device, fix your gres.conf"',
     "%s is not a valid character or block device, fix your gres.conf", "slurm-gres-device-file-missing", None,
     "a gres.conf File= names something that is not a device node (a typo, or a path that is a plain file)"),
    ("slurmd: can't parse gres.conf file record", "gres.c", '"can\'t parse gres.conf file record (%s)"',
     "can't parse gres.conf file record (%s)", "slurm-gres-conf-syntax", None, "a gres.conf line cannot be parsed"),
    ("slurmd: duplicate device file name", "gres.c", '"%s duplicate device file name (%s)"',
     "%s duplicate device file name (%s)", "slurm-gres-conf-duplicate", None,
     "two gres.conf records name the same device file"),
    ("slurmd: Cannot use AutoDetect on cloud/dynamic node", "gres.c",
     '"Cannot use AutoDetect on cloud/dynamic node \\"%s\\""', "Cannot use AutoDetect on cloud/dynamic node \"%s\"",
     "slurm-gres-conf-syntax", None, "gres.conf asks AutoDetect for a cloud or dynamic node, which Slurm does not allow"),
    ("slurmd (22.05-23.02): Cannot use AutoDetect on cloud node", "gres.c",
     '"Cannot use AutoDetect on cloud node \\"%s\\""', "Cannot use AutoDetect on cloud node \"%s\"",
     "slurm-gres-conf-syntax", None, "the same, as Slurm 22.05-23.02 words it (fatal)"),
    ("slurmctld: Invalid GRES configured on node", "gres.c", '"Invalid GRES configured on node %s: %s"',
     "Invalid GRES configured on node %s: %s", "slurm-grestypes-missing", None,
     "slurm.conf's NodeName ... Gres= names a GRES that GresTypes= does not list"),
    ("slurmctld: No plugin configured to process GRES data from node", "gres.c",
     '"%s: No plugin configured to process GRES data from node %s',
     "%s: No plugin configured to process GRES data from node %s (Name:%s Type:%s PluginID:%u Count:%lu)",
     "slurm-grestypes-missing", None,
     "a node's slurmd reports a GRES that slurmctld's GresTypes does not list (slurm.conf differs between nodes, or GresTypes lacks gpu)"),
    ("slurmctld: no plugin configured to unpack data type from job", "gres.c",
     "This is likely due to a difference in the GresTypes configured in slurm.conf on different cluster nodes.",
     "%s: no plugin configured to unpack data type %u from job %u. This is likely due to a difference in the GresTypes configured in slurm.conf on different cluster nodes.",
     "slurm-grestypes-missing", None, "the daemons' slurm.conf files list different GresTypes"),
    ("slurmctld: gres lacks File= parameter", "gres.c", '"%s: gres/%s lacks \\"File=\\" parameter for node %s"',
     "%s: gres/%s lacks \"File=\" parameter for node %s", "slurm-gres-conf-syntax", None,
     "gres/gpu on the node has no File= in gres.conf (and no AutoDetect): GPUs need their device files"),
    ("slurmctld: AutoDetect GPU count does not match slurm.conf", "gres.c",
     "If using AutoDetect the amount of GPUs configured in slurm.conf does not match what was detected.",
     "%s: %s If using AutoDetect the amount of GPUs configured in slurm.conf does not match what was detected. If this is intentional, please turn off AutoDetect and manually specify them in gres.conf.",
     "slurm-gres-count-mismatch", None,
     "the GPUs AutoDetect found (their Links=) disagree with the count slurm.conf declares for the node"),
    ("slurmctld: GRES core specification doesn't match socket boundaries", "gres.c",
     "GRES core specification %s for node %s doesn't match socket boundaries.",
     "%s GRES core specification %s for node %s doesn't match socket boundaries. (Socket %d is cores %d-%d)",
     "slurm-gres-cores-socket-mismatch", None,
     "gres.conf's Cores= for a GPU covers part of a socket; Slurm binds GPUs to whole sockets and drains the node"),
    ("slurmctld: GRES autodetected core affinity doesn't match socket boundaries", "gres.c",
     "GRES autodetected core affinity %s on node %s doesn't match socket boundaries.",
     "%s GRES autodetected core affinity %s on node %s doesn't match socket boundaries. (Socket %d is cores %d-%d). Consider setting Parameters=l3cache_as_socket as part of the Node configuration.",
     "slurm-gres-cores-socket-mismatch", None,
     "NVML reports a GPU's CPU affinity that is not a whole socket as slurm.conf describes the node (AMD EPYC with several NUMA/L3 domains per socket)"),
    ("slurmctld: has CPUs configured for only some of the records", "gres.c",
     '"%s: %s: has CPUs configured for only some of the records on node %s"',
     "%s: %s: has CPUs configured for only some of the records on node %s", "slurm-gres-conf-syntax", None,
     "gres.conf gives Cores= for some GPUs of the node and not for others"),
    ("slurmctld: gres count changed and jobs are using them", "gres.c", '"%s count changed and jobs are using them "',
     "%s count changed and jobs are using them (%lu != %lu)", "slurm-gres-count-mismatch", None,
     "slurmd now reports a different GPU count (a GPU lost or gres.conf changed) while jobs hold GPUs; the node is drained"),
    ("slurmctld: gres type reported but not configured", "gres.c", '"%s type (%s) reported but not configured"',
     "%s type (%s) reported but not configured", "slurm-gres-count-mismatch", None,
     "gres.conf (or AutoDetect) gives the GPUs a Type= that slurm.conf's Gres= for the node does not name"),
    ("slurmctld: configured for resources but found, ignoring topology", "gres.c",
     '"%s on node %s configured for %"PRIu64" resources but "',
     "%s on node %s configured for %lu resources but %lu found, ignoring topology support",
     "slurm-gres-count-mismatch", None, "slurmd found a different number of GPUs than slurm.conf declares"),
    ("slurmctld: Invalid GRES job specification", "gres.c", '"%s: Invalid GRES job specification %s"',
     "%s: Invalid GRES job specification %s", "slurm-invalid-gres-request", None,
     "the job's --gres/--gpus value names no configured GRES or cannot be parsed"),
    ("slurmctld: Invalid GRES step specification", "gres.c", '"Invalid GRES step specification %s"',
     "Invalid GRES step specification %s", "slurm-invalid-gres-request", None,
     "the step's (srun's) --gres/--gpus value names no configured GRES or cannot be parsed"),
    ("slurmctld: Requested mem_per_tres but no GPU", "gres.c", '"Requested mem_per_tres=%s but did not request any GPU."',
     "Requested mem_per_tres=%s but did not request any GPU.", "slurm-gpu-options-inconsistent", None,
     "--mem-per-gpu was given without a GPU request"),
    ("slurmctld: Requested cpus_per_tres but no GPU", "gres.c", '"Requested cpus_per_tres=%s but did not request any GPU."',
     "Requested cpus_per_tres=%s but did not request any GPU.", "slurm-gpu-options-inconsistent", None,
     "--cpus-per-gpu was given without a GPU request"),
    ("slurmctld: ntasks-per-tres needs a GPU specification", "gres.c",
     "--ntasks-per-tres needs either a GRES GPU specification or a node/ntask specification",
     "%s: --ntasks-per-tres needs either a GRES GPU specification or a node/ntask specification",
     "slurm-gpu-options-inconsistent", None, "--ntasks-per-gpu was given without --gpus or -N/-n"),
    ("slurmctld: Failed to ensure --gpus >= --gres/--gpus-per-node", "gres.c",
     '"Failed to ensure --%ss >= --gres=%s/--%ss-per-node >= --%ss-per-socket"',
     "Failed to ensure --%ss >= --gres=%s/--%ss-per-node >= --%ss-per-socket", "slurm-gpu-options-inconsistent", None,
     "the job's GPU counts contradict each other (--gpus smaller than --gpus-per-node ...)"),
    ("slurmctld: Failed to ensure --gpus >= --gpus-per-task", "gres.c", '"Failed to ensure --%ss >= --%ss-per-task"',
     "Failed to ensure --%ss >= --%ss-per-task", "slurm-gpu-options-inconsistent", None,
     "--gpus is smaller than --gpus-per-task"),
    ("slurmctld: --gpus-per-socket requires --sockets-per-node", "gres.c",
     '"--%ss-per-socket option requires --sockets-per-node specification"',
     "--%ss-per-socket option requires --sockets-per-node specification", "slurm-gpu-options-inconsistent", None,
     "--gpus-per-socket was given without --sockets-per-node"),
    ("slurmctld: --cpus-per-gpu mutually exclusive with --cpus-per-task", "gres.c",
     '"--cpus-per-%s is mutually exclusive with --cpus-per-task"',
     "--cpus-per-%s is mutually exclusive with --cpus-per-task", "slurm-gpu-options-inconsistent", None,
     "--cpus-per-gpu and --cpus-per-task were both given"),
    ("slurmctld: Failed to validate job spec (GPU options)", "gres.c",
     '"Failed to validate job spec, --%ss is not multiple of --gres=%s/--%ss-per-node"',
     "Failed to validate job spec, --%ss is not multiple of --gres=%s/--%ss-per-node", "slurm-gpu-options-inconsistent",
     None, "--gpus is not a multiple of --gpus-per-node"),
    ("slurmctld: Failed to validate job spec, --gpus-per-task without --gpus or -n", "gres.c",
     "-per-task or --tres-per-task used without either --",
     "Failed to validate job spec. --%ss-per-task or --tres-per-task used without either --%ss or -n/--ntasks is not allowed.",
     "slurm-gpu-options-inconsistent", None, "--gpus-per-task was given without --gpus or -n/--ntasks"),
    ("slurmctld (22.05): Failed to validate job spec, --gpus-per-task without --gpus or -n", "gres.c",
     "ss-per-task used without either --%ss or -n/--ntasks is not allowed.",
     "Failed to validate job spec. --%ss-per-task used without either --%ss or -n/--ntasks is not allowed.",
     "slurm-gpu-options-inconsistent", None, "the same, as Slurm 22.05 words it"),
    ("slurmctld: Failed to validate job spec, --gpus < -N", "gres.c", '"Failed to validate job spec, --%ss < -N"',
     "Failed to validate job spec, --%ss < -N", "slurm-gpu-options-inconsistent", None,
     "--gpus asks for fewer GPUs than the job has nodes"),
    ("slurmctld: Killing job: gres type not found on node", "gres.c",
     '"%s: Killing job %u: gres/%s type %s not found on node %s"',
     "%s: Killing job %u: gres/%s type %s not found on node %s", "slurm-gres-count-mismatch", None,
     "after a slurmctld restart the node no longer has the GPU type the job was given (gres.conf/slurm.conf changed)"),
    ("slurmctld: step allocates GRES, but job has none", "gres_stepmgr.c", '"%s: step allocates GRES, but %pJ has none"',
     "%s: step allocates GRES, but %s has none", "slurm-step-gres-exceeds-allocation", None,
     "srun asks for GPUs inside a job that was allocated none"),
    ("slurmctld: step's gres > job's", "gres_stepmgr.c", "step's > job's for node %d (gres still needed: %",
     "gres/%s: %s for %s, step's > job's for node %d (gres still needed: %lu)", "slurm-step-gres-exceeds-allocation",
     None, "srun asks for more GPUs on a node than the job holds there"),
    # gres_gpu.c (slurmd, gres/gpu plugin): configured GPUs vs what AutoDetect found
    ("slurmd: GPU has mismatching Cores or Links", "gres_gpu.c",
     "This GPU specified in [slurm|gres].conf has mismatching Cores or Links from the device found on the system. Ignoring it.",
     "This GPU specified in [slurm|gres].conf has mismatching Cores or Links from the device found on the system. Ignoring it.",
     "slurm-gres-count-mismatch", None,
     "a GPU of gres.conf differs from what AutoDetect found (Cores=/Links=), so it is dropped and the node's count falls short"),
    ("slurmd: Discarding config-only GPU", "gres_gpu.c",
     "Discarding the following config-only GPU due to lack of File specification:",
     "Discarding the following config-only GPU due to lack of File specification:", "slurm-gres-count-mismatch", None,
     "gres.conf/slurm.conf declare a GPU that AutoDetect did not find and that has no File=, so it is dropped"),
    # gpu.c: which GPU library slurmd loads for AutoDetect
    ("slurmd: nvml lib wasn't found on the system", "gpu.c",
     "We were configured with nvml functionality, but that lib wasn't found on the system.",
     "We were configured with nvml functionality, but that lib wasn't found on the system.",
     "nvml-library-missing", None,
     "AutoDetect=nvml and Slurm has NVML support, but libnvidia-ml.so(.1) cannot be loaded on this node (no driver)"),
    ("slurmd: rsmi lib wasn't found", "gpu.c", "Configured with rsmi, but that lib wasn't found.",
     "Configured with rsmi, but that lib wasn't found.", "slurm-autodetect-library-missing", None,
     "AutoDetect=rsmi but the ROCm SMI library (librocm_smi64.so) cannot be loaded on this node"),
    ("slurmd: rsmi isn't enabled during the build", "gpu.c", "Configured with rsmi, but rsmi isn't enabled during the build.",
     "Configured with rsmi, but rsmi isn't enabled during the build.", "slurm-built-without-gpu-library", None,
     "AutoDetect=rsmi but this Slurm was built without ROCm SMI"),
    ("slurmd: oneAPI lib wasn't found", "gpu.c", "Configured with oneAPI, but that lib wasn't found.",
     "Configured with oneAPI, but that lib wasn't found.", "slurm-autodetect-library-missing", None,
     "AutoDetect=oneapi but Intel's Level Zero library cannot be loaded on this node"),
    ("slurmd: oneAPI isn't enabled during the build", "gpu.c",
     "Configured with oneAPI, but oneAPI isn't enabled during the build.",
     "Configured with oneAPI, but oneAPI isn't enabled during the build.", "slurm-built-without-gpu-library", None,
     "AutoDetect=oneapi but this Slurm was built without oneAPI"),
    # gpu_nvml.c
    ("slurmd: MIG device count is 0", "gpu_nvml.c", "MIG device count is 0; MIG is either disabled or not supported",
     "MIG device count is 0; MIG is either disabled or not supported", "mig-enabled-no-instances", None,
     "NVML reports no MIG devices on a GPU slurmd treats as MIG-enabled"),
]

DEVICE_PLUGIN = [
    # (name, path, needle, message, cause, requires, meaning)
    ("k8s-device-plugin: did you set the docker default runtime to nvidia", "internal/plugin/factory.go",
     "If this is a GPU node, did you set the docker default runtime to `nvidia`?",
     "If this is a GPU node, did you set the docker default runtime to `nvidia`?", "k8s-device-plugin-no-nvml", None,
     "the plugin could not initialise NVML (printed after 'Failed to initialize NVML: ...'): its container has no driver libraries"),
    ("k8s-device-plugin: did you configure the NVIDIA Container Toolkit", "internal/plugin/factory.go",
     "If this is a GPU node, did you configure the NVIDIA Container Toolkit?",
     "If this is a GPU node, did you configure the NVIDIA Container Toolkit?", "k8s-device-plugin-no-nvml", None,
     "the plugin found neither NVML nor Tegra (printed after 'Incompatible strategy detected auto')"),
    ("k8s-device-plugin: Incompatible strategy detected", "internal/plugin/factory.go",
     '"Incompatible strategy detected %v"', "Incompatible strategy detected %s", "k8s-device-plugin-no-nvml", None,
     "device discovery found no usable GPU library in the plugin's container"),
    ("k8s-device-plugin: not a GPU node, set up a toleration or nodeSelector", "internal/plugin/factory.go",
     "If this is not a GPU node, you should set up a toleration or nodeSelector to only deploy this plugin on GPU nodes",
     "If this is not a GPU node, you should set up a toleration or nodeSelector to only deploy this plugin on GPU nodes",
     "k8s-device-plugin-no-nvml", None, "the closing hint of the same failure"),
    ("k8s-device-plugin: No devices found. Waiting indefinitely.", "cmd/nvidia-device-plugin/main.go",
     '"No devices found. Waiting indefinitely."', "No devices found. Waiting indefinitely.",
     "k8s-device-plugin-no-nvml", None, "the plugin started no resource: it sees no GPU, so the node advertises no nvidia.com/gpu"),
    ("k8s-device-plugin: all devices must have the same migEnabled value", "internal/rm/device_map.go",
     "all devices on the node must be configured with the same migEnabled value",
     "all devices on the node must be configured with the same migEnabled value",
     "k8s-device-plugin-mig-strategy-mismatch", None, "migStrategy=single, but some GPUs have MIG on and others off"),
    ("k8s-device-plugin: more than one MIG device type present", "internal/rm/device_map.go",
     "more than one MIG device type present on node", "more than one MIG device type present on node",
     "k8s-device-plugin-mig-strategy-mismatch", None, "migStrategy=single, but the GPUs carry different MIG profiles"),
    ("k8s-device-plugin: invalid MIG configuration", "internal/rm/device_map.go", '"invalid MIG configuration: %v"',
     "invalid MIG configuration: %s", "k8s-device-plugin-mig-strategy-mismatch", None,
     "the GPUs' MIG layout does not suit the plugin's migStrategy"),
    ("k8s-device-plugin: unknown MIG strategy", "cmd/nvidia-device-plugin/main.go", '"unknown MIG strategy: %v"',
     "unknown MIG strategy: %s", "k8s-device-plugin-mig-strategy-mismatch", None,
     "--mig-strategy / MIG_STRATEGY is not none, single or mixed"),
    ("k8s-device-plugin: device has no MIG devices configured", "internal/rm/device_map.go",
     '"device %v has no MIG devices configured"', "device %s has no MIG devices configured", "mig-enabled-no-instances",
     None, "a GPU has MIG mode on but no GPU/compute instances"),
    ("k8s-device-plugin: at least one device with migEnabled=true was not configured correctly", "internal/rm/device_map.go",
     "t least one device with migEnabled=true was not configured correctly",
     "at least one device with migEnabled=true was not configured correctly: %s", "mig-enabled-no-instances", None,
     "the same, as the error the plugin exits with"),
    ("k8s-device-plugin: device marked unhealthy", "internal/plugin/server.go", '"\'%s\' device marked unhealthy: %s"',
     "'%s' device marked unhealthy: %s", "k8s-no-healthy-devices", None,
     "the plugin told the kubelet a GPU is unhealthy (after an Xid or a lost device)"),
    ("k8s-device-plugin: XidCriticalError marking device unhealthy", "internal/rm/health.go",
     '"XidCriticalError: Xid=%d on Device=%s; marking device as unhealthy."',
     "XidCriticalError: Xid=%d on Device=%s; marking device as unhealthy.", "k8s-no-healthy-devices", None,
     "a critical Xid made the plugin withdraw the GPU"),
    ("k8s-device-plugin: Marking all devices as unhealthy", "internal/rm/health.go",
     '"Error waiting for event: %v; Marking all devices as unhealthy"',
     "Error waiting for event: %s; Marking all devices as unhealthy", "k8s-no-healthy-devices", None,
     "NVML's event wait failed (driver trouble, GPU lost): every GPU withdrawn"),
    ("k8s-device-plugin: GRPC server repeatedly crashed", "internal/plugin/server.go",
     "has repeatedly crashed recently. Quitting", "GRPC server for '%s' has repeatedly crashed recently. Quitting",
     "k8s-device-plugin-unavailable", None, "the plugin's gRPC server kept failing; the plugin exits"),
    ("k8s-device-plugin: Could not register device plugin", "internal/plugin/server.go",
     '"Could not register device plugin: %s"', "Could not register device plugin: %s",
     "k8s-device-plugin-registration-failed", None,
     "the plugin could not reach the kubelet's registration socket (kubelet.sock under the device-plugins directory)"),
]

KUBELET = [
    # left out: "device plugin PreStartContainer/GetPreferredAllocation rpc failed with err: %v" wrap
    # whatever the plugin answered; the cause is the wrapped error, not the wrapper
    ("kubelet: unknown Device Plugin", K8S_MANAGER, "unknown Device Plugin %s", "k8s-device-plugin-unavailable", None,
     "allocation found no endpoint for the resource: its device plugin is not registered (not running, or restarting)"),
    ("kubelet: endpoint not found in cache for a registered resource", K8S_MANAGER,
     "endpoint not found in cache for a registered resource: %s", "k8s-device-plugin-unavailable", None,
     "the resource's device plugin went away between registration and allocation"),
    ("kubelet: endpoint has been stopped", K8S_TYPES, "endpoint %s has been stopped", "k8s-device-plugin-unavailable",
     "nvidia", "the device plugin's endpoint was stopped (plugin exited or re-registering) when the kubelet called it"),
    ("kubelet: manager version not among plugin supported versions", K8S_HANDLER,
     "manager version, %s, is not among plugin supported versions %s", "k8s-device-plugin-registration-failed", None,
     "the device plugin speaks no device-plugin API version this kubelet supports"),
]


def _locate(gitdir, rev, paths, needle):
    for path in paths:
        text = _enum.git_show(gitdir, rev, path, missing_ok=True)
        if text and needle in text:
            return path, text[: text.index(needle)].count("\n") + 1
    return None, None


def build(slurm_git: str | None, dp_git: str | None) -> tuple[list[dict], dict]:
    entries, causes = [], {}
    for name, key, needle, message, cause, requires, meaning in SLURM:
        url = f"https://github.com/{SLURM_REPO}/blob/{SLURM_COMMIT}/{SLURM_PATHS[key][0]}"
        seen, checked = [], "copied from the source by hand"
        if slurm_git:
            for tag in SLURM_TAGS:
                if _locate(slurm_git, tag, SLURM_PATHS[key], needle)[0]:
                    seen.append(tag)
            if not seen:
                raise SystemExit(f"{name}: wording not found in any release")
            newest = seen[-1]
            path, line = _locate(slurm_git, newest, SLURM_PATHS[key], needle)
            commit = subprocess.run(["git", "-C", slurm_git, "rev-parse", newest + "^{commit}"],
                                    capture_output=True, text=True, check=True).stdout.strip()
            url = f"https://github.com/{SLURM_REPO}/blob/{commit}/{path}#L{line}"
            checked = "wording read in the source file (a clone of the repository), line located by this script"
        entries.append({"name": name, "family": "mig" if "MIG" in message else "scheduler", "message": message,
                        "meaning": meaning,
                        "source": {"url": url, "how": f"SchedMD/slurm {key}", "checked": checked},
                        **({"seen_in": seen} if seen else {})})
        causes[name] = {"cause": cause, "requires": requires} if requires else cause
    for name, path, needle, message, cause, requires, meaning in DEVICE_PLUGIN:
        url = f"https://github.com/{DP_REPO}/blob/{DP_COMMIT}/{path}"
        seen, checked = [], "copied from the source by hand"
        if dp_git:
            for tag in DP_TAGS:
                text = "".join(_enum.git_show(dp_git, tag, p, missing_ok=True) or "" for p in (path, path.replace("internal/plugin/factory.go", "cmd/nvidia-device-plugin/main.go")))
                if needle in text or needle.lower() in text.lower():
                    seen.append(tag)
            if not seen:
                raise SystemExit(f"{name}: wording not found in any release")
            _, line = _locate(dp_git, DP_TAG, [path], needle)
            if line:
                url += f"#L{line}"
            checked = "wording read in the source file (a clone of the repository), line located by this script"
        entries.append({"name": name, "family": "mig" if "MIG" in message else "scheduler", "message": message,
                        "meaning": meaning,
                        "source": {"url": url, "how": f"NVIDIA/k8s-device-plugin {path}", "checked": checked},
                        **({"seen_in": seen} if seen else {})})
        causes[name] = {"cause": cause, "requires": requires} if requires else cause
    for name, (path, commit), message, cause, requires, meaning in KUBELET:
        entries.append({"name": name, "family": "scheduler", "message": message, "meaning": meaning,
                        "source": {"url": f"https://github.com/{K8S_REPO}/blob/{commit}/{path}",
                                   "how": f"kubernetes/kubernetes {path}",
                                   "checked": "wording read in the source file (a code index's copy at that commit)"}})
        causes[name] = {"cause": cause, "requires": requires} if requires else cause
    return entries, causes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slurm", help="git dir of SchedMD/slurm (with release tags)")
    ap.add_argument("--device-plugin", help="git dir of NVIDIA/k8s-device-plugin (with release tags)")
    args = ap.parse_args()
    entries, causes = build(args.slurm, args.device_plugin)
    doc = json.loads(PLATFORM.read_text())
    ours = {e["name"] for e in entries}
    doc["entries"] = [e for e in doc["entries"] if e["name"] not in ours] + entries
    PLATFORM.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    spec = json.loads(CODES.read_text())
    spec["messages"]["platform_messages.json"].update(causes)
    CODES.write_text(json.dumps(spec, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(entries)} entries merged into {PLATFORM.name}")


if __name__ == "__main__":
    main()
