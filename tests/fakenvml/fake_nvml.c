/*
 * A fake libnvidia-ml.so.1 for envcheck's tests: the real pynvml bindings load it through
 * ctypes, exactly as they load NVIDIA's library. Every answer comes from the environment:
 *
 *   FAKE_NVML_DRIVER        driver version string, may be empty (default "550.54.15")
 *   FAKE_NVML_CUDA          nvmlSystemGetCudaDriverVersion int (default 12040)
 *   FAKE_NVML_NVML_VERSION  NVML version string                (default "12.550.54.15")
 *   FAKE_NVML_GPUS          GPUs separated by ';', each "NAME,CC,MEMORY_MIB[,key=value...]"
 *                           keys: uuid=GPU-..., pci=00000000:3B:00.0, free=MIB,
 *                           mig=0|1|na, persist=0|1|na (na = NVML_ERROR_NOT_SUPPORTED),
 *                           health (each =na for NOT_SUPPORTED on this GPU): util=GPU/MEM
 *                           percent, temp=C, power=MW, plimit=MW (milliwatts), ecc=VOL/AGG
 *                           uncorrected errors, procs=PID:MIB[:NAME]+... running compute
 *                           processes (NAME answers nvmlSystemGetProcessName; none: NOT_FOUND)
 *                           level-1 health (each =na for NOT_SUPPORTED, as a GeForce answers
 *                           ECC, row remapping and page retirement; defaults are healthy):
 *                           remap=CORR/UNC/PENDING/FAILURE rows (nvmlDeviceGetRemappedRows,
 *                           default 0/0/0/0), retired=0|1 retired pages pending (default 0),
 *                           pcie=CURGEN/MAXGEN/CURWIDTH/MAXWIDTH link (default 4/4/16/16),
 *                           replay=N[+STEP[@R]] PCIe replay counter: N, then STEP more at each
 *                           read from the Rth on (default R 2: every read after the first; a
 *                           level-1 read reads it twice, so R 3 means after the level-1 read;
 *                           default 0), clocks=HEX clock event reasons, also served as
 *                           the older ...ThrottleReasons (default 0), tlimit=SLOW/SHUT
 *                           slowdown/shutdown temperature thresholds C (default 87/92),
 *                           cmode=0|2|3 compute mode (default, prohibited, exclusive
 *                           process; default 0), minor=N /dev/nvidiaN (default: the index),
 *                           events=1|na NVML events supported (default 1), xid=N[+N...]
 *                           critical-Xid events queued on this GPU, each delivered once by
 *                           nvmlEventSetWait_v2 to a set it is registered in (which answers
 *                           NVML_ERROR_TIMEOUT at once when none is left), xidlate=K the
 *                           first K waits on a set get none of them (a level-1 read waits
 *                           once: K 1 delivers them after it, during the run; default 0),
 *                           nvlink=LINKS/VERSION active NVLink links and nvmlDeviceGetNvLink
 *                           Version's answer (default na: NOT_SUPPORTED, a GPU without NVLink;
 *                           links past LINKS answer INVALID_ARGUMENT), appclocks=SM/MEM the
 *                           applications clocks (MHz, default 1410/1215), maxclocks=SM/MEM the
 *                           maximum clocks (default 1410/1593), each =na for NOT_SUPPORTED
 *   FAKE_NVML_INIT_ERROR    nvmlReturn_t code returned by nvmlInit_v2 / nvmlInitWithFlags
 *   FAKE_NVML_ERROR_<fn>    "CODE" (every call of fn) or "CODE:I,J" (only for GPUs I and J)
 *   FAKE_NVML_HANG_<fn>     "SECONDS" or "SECONDS:I,J": fn answers only after SECONDS (a GPU
 *                           that stopped answering; for every GPU, or only GPUs I and J)
 *   FAKE_NVML_TRACE         a file; the name of every function called is appended to it
 *
 * A function is left out of the library (dlsym fails, as with an older driver) by compiling
 * with -DOMIT_<fn>; the test fixture builds one variant per set of omitted functions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef struct fake_device *nvmlDevice_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

enum { MAX_GPUS = 64, MAX_MIG = 7, MAX_PROCS = 16, MAX_XIDS = 16, NA = -1 };

struct fake_device {
    int index;              /* index of the physical GPU */
    int is_mig;
    char name[96];
    char uuid[96];
    char pci[32];
    int cc_major, cc_minor;
    unsigned long long total_mib, free_mib;
    int mig, persist;       /* 0, 1 or NA */
    int util_gpu, util_mem, temp, power_mw, plimit_mw; /* or NA */
    long long ecc_volatile, ecc_aggregate;              /* or NA */
    int nprocs;             /* NA: the process query is not supported */
    unsigned int proc_pid[MAX_PROCS];
    unsigned long long proc_mib[MAX_PROCS];
    int remap_corr, remap_unc, remap_pending, remap_failure; /* remap_corr NA: unsupported */
    int retired_pending;                                      /* 0, 1 or NA */
    int pcie_cur_gen, pcie_max_gen, pcie_cur_width, pcie_max_width; /* pcie_cur_gen NA */
    long long replay;                                         /* or NA */
    int replay_step, replay_from, replay_reads;
    long long clocks;                                         /* bit mask, or NA */
    int t_slow, t_shut, cmode, minor, events;                 /* or NA */
    int xids[MAX_XIDS], nxids, xid_next, xid_late;
    int nvlinks, nvlink_version;                              /* nvlinks NA: no NVLink */
    int app_sm, app_mem, max_sm, max_mem;                     /* MHz, or NA */
};

struct process_name {
    unsigned int pid;
    char name[128];
};

static struct fake_device gpus[MAX_GPUS];
static struct fake_device migs[MAX_GPUS];
static int gpu_count;
static struct process_name names[MAX_GPUS * MAX_PROCS];
static int name_count;
static int init_count;
static int loaded;

static int na_or_int(const char *v) { return strcmp(v, "na") == 0 ? NA : atoi(v); }

/* "A/B" into two ints, or both NA for "na". */
static void pair(const char *v, int *a, int *b)
{
    *a = *b = NA;
    if (strcmp(v, "na") != 0) sscanf(v, "%d/%d", a, b);
}

/* procs=PID:MIB[:NAME]+PID:MIB[:NAME]... */
static void parse_procs(struct fake_device *d, const char *v)
{
    if (strcmp(v, "na") == 0) { d->nprocs = NA; return; }
    char *copy = strdup(v);
    char *save = NULL;
    for (char *p = strtok_r(copy, "+", &save); p && d->nprocs < MAX_PROCS; p = strtok_r(NULL, "+", &save)) {
        char name[128] = "";
        if (sscanf(p, "%u:%llu:%127[^\n]", &d->proc_pid[d->nprocs], &d->proc_mib[d->nprocs], name) < 2)
            continue;
        if (*name && name_count < MAX_GPUS * MAX_PROCS) {
            names[name_count].pid = d->proc_pid[d->nprocs];
            snprintf(names[name_count].name, sizeof names[name_count].name, "%s", name);
            name_count++;
        }
        d->nprocs++;
    }
    free(copy);
}

/* The level-1 health keys (see the header); an unknown key is ignored. */
static void parse_level1(struct fake_device *d, const char *key, const char *v)
{
    int na = strcmp(v, "na") == 0;
    if (!strcmp(key, "remap")) {
        d->remap_corr = d->remap_unc = d->remap_pending = d->remap_failure = 0;
        if (na) d->remap_corr = NA;
        else sscanf(v, "%d/%d/%d/%d", &d->remap_corr, &d->remap_unc, &d->remap_pending,
                    &d->remap_failure);
    }
    else if (!strcmp(key, "retired")) d->retired_pending = na_or_int(v);
    else if (!strcmp(key, "pcie")) {
        if (na) d->pcie_cur_gen = NA;
        else sscanf(v, "%d/%d/%d/%d", &d->pcie_cur_gen, &d->pcie_max_gen, &d->pcie_cur_width,
                    &d->pcie_max_width);
    }
    else if (!strcmp(key, "replay")) {
        d->replay = NA;
        d->replay_step = 0;
        d->replay_from = 2;
        if (!na) sscanf(v, "%lld+%d@%d", &d->replay, &d->replay_step, &d->replay_from);
    }
    else if (!strcmp(key, "clocks")) d->clocks = na ? NA : (long long)strtoull(v, NULL, 0);
    else if (!strcmp(key, "tlimit")) pair(v, &d->t_slow, &d->t_shut);
    else if (!strcmp(key, "cmode")) d->cmode = na_or_int(v);
    else if (!strcmp(key, "minor")) d->minor = na_or_int(v);
    else if (!strcmp(key, "events")) d->events = na_or_int(v);
    else if (!strcmp(key, "xidlate")) d->xid_late = atoi(v);
    else if (!strcmp(key, "appclocks")) pair(v, &d->app_sm, &d->app_mem);
    else if (!strcmp(key, "maxclocks")) pair(v, &d->max_sm, &d->max_mem);
    else if (!strcmp(key, "nvlink")) {
        d->nvlinks = NA;
        if (!na) sscanf(v, "%d/%d", &d->nvlinks, &d->nvlink_version);
    }
    else if (!strcmp(key, "xid")) {
        char *copy = strdup(v);
        char *save = NULL;
        for (char *p = strtok_r(copy, "+", &save); p && d->nxids < MAX_XIDS;
             p = strtok_r(NULL, "+", &save))
            d->xids[d->nxids++] = atoi(p);
        free(copy);
    }
}

static void parse_gpu(char *spec, int i)
{
    struct fake_device *d = &gpus[i];
    char *save = NULL;
    char *field = strtok_r(spec, ",", &save);
    memset(d, 0, sizeof *d);
    d->index = i;
    d->mig = NA;
    d->persist = 1;
    d->temp = 40;
    d->power_mw = 60000;
    d->plimit_mw = 300000;
    d->pcie_cur_gen = d->pcie_max_gen = 4;
    d->pcie_cur_width = d->pcie_max_width = 16;
    d->t_slow = 87;
    d->t_shut = 92;
    d->minor = i;
    d->events = 1;
    d->nvlinks = NA;
    d->app_sm = 1410;
    d->app_mem = 1215;
    d->max_sm = 1410;
    d->max_mem = 1593;
    d->replay_from = 2;
    snprintf(d->name, sizeof d->name, "%s", field ? field : "NVIDIA Fake GPU");
    snprintf(d->uuid, sizeof d->uuid, "GPU-fa4e0000-0000-0000-0000-%012d", i);
    snprintf(d->pci, sizeof d->pci, "00000000:%02X:00.0", 0x10 + i);
    field = strtok_r(NULL, ",", &save);
    if (field) sscanf(field, "%d.%d", &d->cc_major, &d->cc_minor);
    field = strtok_r(NULL, ",", &save);
    d->total_mib = field ? strtoull(field, NULL, 10) : 16384;
    d->free_mib = d->total_mib - 300;
    while ((field = strtok_r(NULL, ",", &save))) {
        char *eq = strchr(field, '=');
        if (!eq) continue;
        *eq = '\0';
        const char *v = eq + 1;
        if (!strcmp(field, "uuid")) snprintf(d->uuid, sizeof d->uuid, "%s", v);
        else if (!strcmp(field, "pci")) snprintf(d->pci, sizeof d->pci, "%s", v);
        else if (!strcmp(field, "free")) d->free_mib = strtoull(v, NULL, 10);
        else if (!strcmp(field, "mig")) d->mig = na_or_int(v);
        else if (!strcmp(field, "persist")) d->persist = na_or_int(v);
        else if (!strcmp(field, "util")) pair(v, &d->util_gpu, &d->util_mem);
        else if (!strcmp(field, "temp")) d->temp = na_or_int(v);
        else if (!strcmp(field, "power")) d->power_mw = na_or_int(v);
        else if (!strcmp(field, "plimit")) d->plimit_mw = na_or_int(v);
        else if (!strcmp(field, "procs")) parse_procs(d, v);
        else if (!strcmp(field, "ecc")) {
            int vol, agg;
            pair(v, &vol, &agg);
            d->ecc_volatile = vol;
            d->ecc_aggregate = agg;
        }
        else parse_level1(d, field, v);
    }
    migs[i] = *d;
    migs[i].is_mig = 1;
    snprintf(migs[i].uuid, sizeof migs[i].uuid, "MIG-%s", d->uuid + 4);
}

static void load(void)
{
    if (loaded) return;
    loaded = 1;
    const char *env = getenv("FAKE_NVML_GPUS");
    if (!env || !*env) return;
    char *copy = strdup(env);
    char *save = NULL;
    for (char *spec = strtok_r(copy, ";", &save); spec && gpu_count < MAX_GPUS;
         spec = strtok_r(NULL, ";", &save))
        parse_gpu(spec, gpu_count++);
    free(copy);
}

static void trace(const char *fn)
{
    const char *path = getenv("FAKE_NVML_TRACE");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s\n", fn);
    fclose(f);
}

/* The error FAKE_NVML_ERROR_<fn> asks for, for GPU `gpu` (-1: a system-wide call). */
static nvmlReturn_t injected(const char *fn, int gpu)
{
    char key[160];
    snprintf(key, sizeof key, "FAKE_NVML_ERROR_%s", fn);
    const char *v = getenv(key);
    if (!v || !*v) return 0;
    char *end;
    long code = strtol(v, &end, 10);
    if (*end != ':' || gpu < 0) return (nvmlReturn_t)code;
    for (const char *p = end + 1; *p;) {
        long i = strtol(p, &end, 10);
        if (end == p) break;
        if (i == gpu) return (nvmlReturn_t)code;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* FAKE_NVML_HANG_<fn>: "SECONDS" (every call of fn) or "SECONDS:I,J" (only for GPUs I and J):
   the call answers only after that long, as NVML does for a GPU that stopped answering. */
static void hang(const char *fn, int gpu)
{
    char key[160];
    snprintf(key, sizeof key, "FAKE_NVML_HANG_%s", fn);
    const char *v = getenv(key);
    if (!v || !*v) return;
    char *end;
    double seconds = strtod(v, &end);
    int match = *end != ':';
    for (const char *p = end + 1; !match && *end == ':' && *p;) {
        long i = strtol(p, &end, 10);
        if (end == p) break;
        match = i == gpu;
        p = *end ? end + 1 : end;
    }
    if (match && seconds > 0) {
        struct timespec t = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
        while (nanosleep(&t, &t) != 0) {}
    }
}

static nvmlReturn_t enter(const char *fn, int gpu)
{
    load();
    trace(fn);
    if (init_count == 0) return 1; /* NVML_ERROR_UNINITIALIZED */
    hang(fn, gpu);
    return injected(fn, gpu);
}

static int device_index(nvmlDevice_t d)
{
    if (d >= gpus && d < gpus + gpu_count) return (int)(d - gpus);
    if (d >= migs && d < migs + gpu_count) return (int)(d - migs);
    return -1;
}

#define ENTER(gpu) do { nvmlReturn_t e_ = enter(__func__, (gpu)); if (e_) return e_; } while (0)
#define ENTER_DEVICE(dev) \
    do { if (device_index(dev) < 0) return 2; ENTER(device_index(dev)); } while (0)

static nvmlReturn_t do_init(const char *fn)
{
    load();
    trace(fn);
    const char *v = getenv("FAKE_NVML_INIT_ERROR");
    if (v && *v && atoi(v)) return atoi(v);
    nvmlReturn_t e = injected(fn, -1);
    if (e) return e;
    init_count++;
    return 0;
}

static nvmlReturn_t copy_string(const char *s, char *buf, unsigned int size)
{
    if (strlen(s) + 1 > size) return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
    memcpy(buf, s, strlen(s) + 1);
    return 0;
}

static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

#ifndef OMIT_nvmlInit_v2
nvmlReturn_t nvmlInit_v2(void) { return do_init(__func__); }
#endif

#ifndef OMIT_nvmlInitWithFlags
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return do_init(__func__); }
#endif

nvmlReturn_t nvmlShutdown(void)
{
    ENTER(-1);
    init_count--;
    return 0;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 6: return "Not Found";
    case 9: return "Driver Not Loaded";
    case 12: return "NVML Shared Library Not Found";
    case 10: return "Timeout";
    case 13: return "Function Not Found";
    case 15: return "GPU is lost";
    case 16: return "GPU requires restart";
    case 17: return "The operating system has blocked the request.";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    case 999: return "Unknown Error";
    default: return "Fake NVML error";
    }
}

#ifndef OMIT_nvmlSystemGetDriverVersion
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    ENTER(-1);
    const char *driver = getenv("FAKE_NVML_DRIVER"); /* set but empty: an empty answer */
    return copy_string(driver ? driver : "550.54.15", version, length);
}
#endif

#ifndef OMIT_nvmlSystemGetNVMLVersion
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    ENTER(-1);
    return copy_string(env_or("FAKE_NVML_NVML_VERSION", "12.550.54.15"), version, length);
}
#endif

#ifndef OMIT_nvmlSystemGetCudaDriverVersion
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version)
{
    ENTER(-1);
    *version = atoi(env_or("FAKE_NVML_CUDA", "12040"));
    return 0;
}
#endif

#ifndef OMIT_nvmlSystemGetCudaDriverVersion_v2
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version)
{
    ENTER(-1);
    *version = atoi(env_or("FAKE_NVML_CUDA", "12040"));
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetCount_v2
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    ENTER(-1);
    *count = (unsigned int)gpu_count;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetHandleByIndex_v2
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (index >= (unsigned int)MAX_GPUS) return 2;
    ENTER((int)index);
    if (index >= (unsigned int)gpu_count) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *device = &gpus[index];
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetIndex
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    ENTER_DEVICE(device);
    *index = (unsigned int)device->index;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetName
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    ENTER_DEVICE(device);
    return copy_string(device->name, name, length);
}
#endif

#ifndef OMIT_nvmlDeviceGetUUID
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    ENTER_DEVICE(device);
    return copy_string(device->uuid, uuid, length);
}
#endif

#ifndef OMIT_nvmlDeviceGetMemoryInfo
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    ENTER_DEVICE(device);
    memory->total = device->total_mib << 20;
    memory->free = device->free_mib << 20;
    memory->used = memory->total - memory->free;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetMemoryInfo_v2
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    ENTER_DEVICE(device);
    memory->total = device->total_mib << 20;
    memory->reserved = 0;
    memory->free = device->free_mib << 20;
    memory->used = memory->total - memory->free;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetCudaComputeCapability
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    ENTER_DEVICE(device);
    *major = device->cc_major;
    *minor = device->cc_minor;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetPciInfo_v3
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    ENTER_DEVICE(device);
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "%s", device->pci);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", device->pci + 4);
    sscanf(device->pci, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
    pci->pciDeviceId = 0x20B510DE;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetPersistenceMode
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, unsigned int *mode)
{
    ENTER_DEVICE(device);
    if (device->persist == NA) return 3; /* NVML_ERROR_NOT_SUPPORTED */
    *mode = (unsigned int)device->persist;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetMigMode
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending)
{
    ENTER_DEVICE(device);
    if (device->mig == NA || device->is_mig) return 3;
    *current = *pending = (unsigned int)device->mig;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetMaxMigDeviceCount
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    ENTER_DEVICE(device);
    if (device->mig == NA || device->is_mig) return 3;
    *count = MAX_MIG;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetMigDeviceHandleByIndex
/* One MIG instance (slot 0) on every GPU whose MIG mode is enabled; other slots are empty. */
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *mig)
{
    ENTER_DEVICE(device);
    if (device->mig == NA || device->is_mig) return 3;
    if (index >= MAX_MIG) return 2;
    if (device->mig != 1 || index != 0) return 6; /* NVML_ERROR_NOT_FOUND */
    *mig = &migs[device->index];
    return 0;
}
#endif

/* -- health: read only by `envcheck doctor --markdown` ------------------------------------ */

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v3_t;

#ifndef OMIT_nvmlDeviceGetUtilizationRates
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util)
{
    ENTER_DEVICE(device);
    if (device->util_gpu == NA) return 3;
    util->gpu = (unsigned int)device->util_gpu;
    util->memory = (unsigned int)device->util_mem;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetTemperature
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp)
{
    ENTER_DEVICE(device);
    if (sensor != 0) return 2; /* only NVML_TEMPERATURE_GPU */
    if (device->temp == NA) return 3;
    *temp = (unsigned int)device->temp;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetPowerUsage
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *mw)
{
    ENTER_DEVICE(device);
    if (device->power_mw == NA) return 3;
    *mw = (unsigned int)device->power_mw;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetEnforcedPowerLimit
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *mw)
{
    ENTER_DEVICE(device);
    if (device->plimit_mw == NA) return 3;
    *mw = (unsigned int)device->plimit_mw;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetTotalEccErrors
/* errorType 1 = uncorrected (the only one faked); counterType 0 = volatile, 1 = aggregate. */
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type, int counter_type,
                                         unsigned long long *count)
{
    ENTER_DEVICE(device);
    if (error_type != 1 || counter_type < 0 || counter_type > 1) return 2;
    long long value = counter_type == 0 ? device->ecc_volatile : device->ecc_aggregate;
    if (value == NA) return 3;
    *count = (unsigned long long)value;
    return 0;
}
#endif

#if !defined(OMIT_nvmlDeviceGetComputeRunningProcesses_v3) || !defined(OMIT_nvmlDeviceGetComputeRunningProcesses_v2)
static nvmlReturn_t running_processes(nvmlDevice_t device, unsigned int *count, nvmlProcessInfo_v3_t *infos)
{
    if (device->nprocs == NA) return 3;
    unsigned int n = (unsigned int)device->nprocs;
    if (n == 0) { *count = 0; return 0; }
    if (!infos || *count < n) { *count = n; return 7; } /* NVML_ERROR_INSUFFICIENT_SIZE */
    for (unsigned int i = 0; i < n; i++) {
        memset(&infos[i], 0, sizeof infos[i]);
        infos[i].pid = device->proc_pid[i];
        infos[i].usedGpuMemory = device->proc_mib[i] << 20;
    }
    *count = n;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetComputeRunningProcesses_v3
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
                                                     nvmlProcessInfo_v3_t *infos)
{
    ENTER_DEVICE(device);
    return running_processes(device, count, infos);
}
#endif

#ifndef OMIT_nvmlDeviceGetComputeRunningProcesses_v2
/* A driver before 510 has this one only; the same struct as _v3's. */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
                                                     nvmlProcessInfo_v3_t *infos)
{
    ENTER_DEVICE(device);
    return running_processes(device, count, infos);
}
#endif

#ifndef OMIT_nvmlSystemGetProcessName
nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
    ENTER(-1);
    for (int i = 0; i < name_count; i++)
        if (names[i].pid == pid) return copy_string(names[i].name, name, length);
    return 6; /* NVML_ERROR_NOT_FOUND */
}
#endif

/* -- level-1 health: ECC bookkeeping, PCIe, clocks, modes, device nodes, Xid events -------- */

#ifndef OMIT_nvmlDeviceGetRemappedRows
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corr, unsigned int *unc,
                                       unsigned int *pending, unsigned int *failure)
{
    ENTER_DEVICE(device);
    if (device->remap_corr == NA) return 3;
    *corr = (unsigned int)device->remap_corr;
    *unc = (unsigned int)device->remap_unc;
    *pending = (unsigned int)device->remap_pending;
    *failure = (unsigned int)device->remap_failure;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetRetiredPagesPendingStatus
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, int *pending)
{
    ENTER_DEVICE(device);
    if (device->retired_pending == NA) return 3;
    *pending = device->retired_pending;
    return 0;
}
#endif

/* The four PCIe link reads: which = 0 current gen, 1 max gen, 2 current width, 3 max width. */
static nvmlReturn_t pcie_link(nvmlDevice_t device, int which, unsigned int *out)
{
    if (device->pcie_cur_gen == NA) return 3;
    const int values[] = {device->pcie_cur_gen, device->pcie_max_gen, device->pcie_cur_width,
                          device->pcie_max_width};
    *out = (unsigned int)values[which];
    return 0;
}

#ifndef OMIT_nvmlDeviceGetCurrPcieLinkGeneration
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *gen)
{
    ENTER_DEVICE(device);
    return pcie_link(device, 0, gen);
}
#endif

#ifndef OMIT_nvmlDeviceGetMaxPcieLinkGeneration
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *gen)
{
    ENTER_DEVICE(device);
    return pcie_link(device, 1, gen);
}
#endif

#ifndef OMIT_nvmlDeviceGetCurrPcieLinkWidth
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *width)
{
    ENTER_DEVICE(device);
    return pcie_link(device, 2, width);
}
#endif

#ifndef OMIT_nvmlDeviceGetMaxPcieLinkWidth
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *width)
{
    ENTER_DEVICE(device);
    return pcie_link(device, 3, width);
}
#endif

#ifndef OMIT_nvmlDeviceGetPcieReplayCounter
/* replay=N+STEP: N at the first read, STEP more at each later one (a link retrying now). */
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)
{
    ENTER_DEVICE(device);
    if (device->replay == NA) return 3;
    if (++device->replay_reads >= device->replay_from && device->replay_reads > 1)
        device->replay += device->replay_step;
    *value = (unsigned int)device->replay;
    return 0;
}
#endif

static nvmlReturn_t clock_reasons(nvmlDevice_t device, unsigned long long *reasons)
{
    if (device->clocks == NA) return 3;
    *reasons = (unsigned long long)device->clocks;
    return 0;
}

#ifndef OMIT_nvmlDeviceGetCurrentClocksEventReasons
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *reasons)
{
    ENTER_DEVICE(device);
    return clock_reasons(device, reasons);
}
#endif

#ifndef OMIT_nvmlDeviceGetCurrentClocksThrottleReasons
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *reasons)
{
    ENTER_DEVICE(device);
    return clock_reasons(device, reasons);
}
#endif

#ifndef OMIT_nvmlDeviceGetTemperatureThreshold
/* threshold 0 = NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, 1 = ..._SLOWDOWN; others unsupported. */
nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, int threshold,
                                               unsigned int *temp)
{
    ENTER_DEVICE(device);
    int value = threshold == 0 ? device->t_shut : threshold == 1 ? device->t_slow : NA;
    if (value == NA) return 3;
    *temp = (unsigned int)value;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetComputeMode
nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, int *mode)
{
    ENTER_DEVICE(device);
    if (device->cmode == NA) return 3;
    *mode = device->cmode;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetMinorNumber
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
    ENTER_DEVICE(device);
    if (device->minor == NA) return 3;
    *minor = (unsigned int)device->minor;
    return 0;
}
#endif

typedef struct fake_event_set {
    unsigned long long types[MAX_GPUS]; /* event types registered, per physical GPU */
    int waits[MAX_GPUS];                /* waits that could have delivered this GPU's Xids */
} *nvmlEventSet_t;

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

/* nvmlEventTypeSingleBitEccError | DoubleBitEccError | PState | XidCriticalError | Clock */
enum { SUPPORTED_EVENTS = 0x1f, XID_CRITICAL = 0x8 };

#ifndef OMIT_nvmlEventSetCreate
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    ENTER(-1);
    *set = calloc(1, sizeof **set);
    return *set ? 0 : 999;
}
#endif

#ifndef OMIT_nvmlDeviceGetSupportedEventTypes
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *types)
{
    ENTER_DEVICE(device);
    if (device->events == NA) return 3;
    *types = SUPPORTED_EVENTS;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceRegisterEvents
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set)
{
    ENTER_DEVICE(device);
    if (!set) return 2;
    if (device->events == NA || device->is_mig || !(types & SUPPORTED_EVENTS)) return 3;
    set->types[device->index] |= types & SUPPORTED_EVENTS;
    return 0;
}
#endif

#ifndef OMIT_nvmlEventSetWait_v2
/* The next queued Xid of a GPU registered for it, or NVML_ERROR_TIMEOUT (10) at once. */
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout)
{
    (void)timeout;
    ENTER(-1);
    if (!set) return 2;
    for (int i = 0; i < gpu_count; i++) {
        struct fake_device *d = &gpus[i];
        if (!(set->types[i] & XID_CRITICAL) || d->xid_next >= d->nxids) continue;
        if (set->waits[i]++ < d->xid_late) continue;
        memset(data, 0, sizeof *data);
        data->device = d;
        data->eventType = XID_CRITICAL;
        data->eventData = (unsigned long long)d->xids[d->xid_next++];
        data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFF;
        return 0;
    }
    return 10;
}
#endif

#ifndef OMIT_nvmlEventSetFree
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    ENTER(-1);
    free(set);
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetNvLinkState
/* nvlink=LINKS/VERSION: links 0..LINKS-1 active; past them INVALID_ARGUMENT; none: NOT_SUPPORTED */
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, unsigned int *active)
{
    ENTER_DEVICE(device);
    if (device->nvlinks == NA) return 3;
    if (link >= (unsigned int)device->nvlinks) return 2;
    *active = 1;
    return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetNvLinkVersion
nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link, unsigned int *version)
{
    ENTER_DEVICE(device);
    if (device->nvlinks == NA) return 3;
    if (link >= (unsigned int)device->nvlinks) return 2;
    *version = (unsigned int)device->nvlink_version;
    return 0;
}
#endif

/* clock type 1 = NVML_CLOCK_SM, 2 = NVML_CLOCK_MEM; others (graphics, video) unsupported here. */
static nvmlReturn_t clock_of(int sm, int mem, int type, unsigned int *clock)
{
    int value = type == 1 ? sm : type == 2 ? mem : NA;
    if (value == NA) return 3;
    *clock = (unsigned int)value;
    return 0;
}

#ifndef OMIT_nvmlDeviceGetApplicationsClock
nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device, int type, unsigned int *clock)
{
    ENTER_DEVICE(device);
    return clock_of(device->app_sm, device->app_mem, type, clock);
}
#endif

#ifndef OMIT_nvmlDeviceGetMaxClockInfo
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *clock)
{
    ENTER_DEVICE(device);
    return clock_of(device->max_sm, device->max_mem, type, clock);
}
#endif
