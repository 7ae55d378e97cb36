"""`envcheck doctor --markdown`: one pasteable report, GPU health read through the real pynvml
from the fake libnvidia-ml.so.1, N/A where a GPU can't answer, table markup that holds."""
from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import pytest

from fake_nvml import A100, FakeNvml
from test_select import make_env

pytestmark = pytest.mark.timeout(300)

HEALTHY = A100 + ",util=37/12,temp=45,power=71000,plimit=400000,ecc=2/5,procs=1234:512:/opt/conda/bin/python3"
NOTHING = "NVIDIA T4,7.5,15360,mig=na,util=na,temp=na,power=na,plimit=na,ecc=na,procs=na"
GPU_COLUMNS = 10
HEALTH_FUNCTIONS = {"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetTemperature",
                    "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
                    "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetComputeRunningProcesses_v3",
                    "nvmlSystemGetProcessName"}


def cells(row: str) -> list[str]:
    """A Markdown table row's cells, split where GitHub splits them: at unescaped pipes."""
    assert row.startswith("| ") and row.endswith(" |"), row
    return [c.strip() for c in re.split(r"(?<!\\)\|", row[1:-1])]


def gpu_rows(markdown: str) -> list[list[str]]:
    lines = markdown.splitlines()
    start = lines.index("### GPUs") + 2
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    header, rule, *rows = table
    assert len(cells(header)) == GPU_COLUMNS and rule == "|" + "---|" * GPU_COLUMNS
    return [cells(r) for r in rows]


def doctor_markdown(fake_nvml: FakeNvml, home: Path, gpus: list[str], **extra) -> str:
    result = fake_nvml.cli(fake_nvml.env(gpus, ENVCHECK_HOME=str(home), **extra),
                           "doctor", "--markdown", "--no-smoke")
    assert "Traceback" not in result.err and result.code in (0, 1), result.err
    return result.out


def test_health_fields_and_versions(fake_nvml: FakeNvml, home: Path, wheelhouse: Path) -> None:
    make_env(home, wheelhouse, "tf", "tensorflow-cpu==2.21.0")
    out = doctor_markdown(fake_nvml, home, [HEALTHY], FAKE_NVML_CUDA=12020)
    for fact in (f"| envcheck | {version('envcheck')} |", "| NVIDIA driver | 550.54.15 |", "| CUDA (driver) | 12.2 |",
                 "| Python | 3."):
        assert fact in out
    [row] = gpu_rows(out)
    assert row == ["0", "NVIDIA A100-SXM4-80GB", "8.0", "300 / 81920 MiB", "37 % / 12 %", "45 °C",
                   "71 / 400 W", "2 / 5", "1234 python3 (512 MiB)", "not-ready"]  # its health, not NVML's "ok"
    assert "/opt/conda" not in out  # a process's name, never its path
    envs = out.split("### Envs")[1]
    assert "| tf | ready | tensorflow-cpu 2.21.0 |" in envs and "| quick |" in envs
    assert "### Validated now: env tf, verdict **degraded**" in out  # a CPU build beside a usable GPU


def test_a_stored_verdict_that_no_longer_holds_is_shown_out_of_date(fake_nvml: FakeNvml, home: Path,
                                                                     wheelhouse: Path) -> None:
    for name in ("one", "two"):
        make_env(home, wheelhouse, name, "tensorflow-cpu==2.21.0")
    first = doctor_markdown(fake_nvml, home, [HEALTHY])
    validated = first.split("### Validated now: env ")[1].split(",")[0]
    other = ({"one", "two"} - {validated}).pop()
    r = fake_nvml.cli(fake_nvml.env([HEALTHY], ENVCHECK_HOME=str(home)), "validate", other, "--no-smoke")
    assert r.code == 0, r.err
    # on another driver, the doctor validates its env again; the other's verdict is old news
    later = doctor_markdown(fake_nvml, home, [HEALTHY], FAKE_NVML_DRIVER="555.42.02")
    rows = {line.split("|")[1].strip(): line for line in later.split("### Envs")[1].splitlines() if line.startswith("| ")}
    assert "| out of date (degraded; NVIDIA driver changed since) |" in rows[other]
    assert "out of date" not in rows[validated]


def test_unsupported_fields_are_na_with_the_reason(fake_nvml: FakeNvml, home: Path) -> None:
    out = doctor_markdown(fake_nvml, home, [HEALTHY, NOTHING])
    healthy, bare = gpu_rows(out)
    assert healthy[4:9] == ["37 % / 12 %", "45 °C", "71 / 400 W", "2 / 5", "1234 python3 (512 MiB)"]
    assert bare[:4] == ["1", "NVIDIA T4", "7.5", "300 / 15360 MiB"]
    assert bare[4:9] == ["N/A", "N/A", "N/A", "N/A", "N/A"]
    for label in ("temperature", "power draw", "power limit", "ECC errors (volatile)", "processes"):
        assert f"- GPU 1: {label} N/A: not supported on this GPU" in out
    assert "- GPU 0:" not in out


def test_na_from_an_injected_error_and_an_older_driver(fake_nvml: FakeNvml, home: Path) -> None:
    out = doctor_markdown(fake_nvml, home, [HEALTHY, HEALTHY],
                          omit=["nvmlDeviceGetComputeRunningProcesses_v3",  # a driver with neither
                                "nvmlDeviceGetComputeRunningProcesses_v2"],  # (before 470)
                          FAKE_NVML_ERROR_nvmlDeviceGetTemperature="3:1")
    first, second = gpu_rows(out)
    assert first[5] == "45 °C" and second[5] == "N/A"
    assert first[8] == second[8] == "N/A"
    assert "- GPU 1: temperature N/A: not supported on this GPU" in out
    assert "- GPU 0: processes N/A: this driver's NVML lacks the function (older driver)" in out


def test_a_gpu_lost_while_its_health_is_read_is_its_own_row(fake_nvml: FakeNvml, home: Path) -> None:
    out = doctor_markdown(fake_nvml, home, [HEALTHY, HEALTHY],
                          FAKE_NVML_ERROR_nvmlDeviceGetPowerUsage="15:1")
    first, lost = gpu_rows(out)
    assert first[6] == "71 / 400 W" and first[9] == "not-ready"  # 2 uncorrected ECC errors
    assert lost[4:9] == ["N/A"] * 5 and lost[9] == "not-ready"
    assert "- GPU 1: lost: the GPU has fallen off the bus" in out


def test_odd_characters_cannot_break_the_table(fake_nvml: FakeNvml, home: Path) -> None:
    odd = "Evil | GPU `x` <b>*y*</b> [z](http://e) _w_"
    out = doctor_markdown(fake_nvml, home, [f"{odd},8.0,81920,procs=7:64:/bin/a|b*c"])
    [row] = gpu_rows(out)
    assert row[1] == r"Evil \| GPU \`x\` \<b\>\*y\*\</b\> \[z\](http://e) \_w\_"
    assert row[8] == r"7 a\|b\*c (64 MiB)"
    assert "<b>" not in out


def test_no_nvml_still_reports(fake_nvml: FakeNvml, home: Path, tmp_path: Path) -> None:
    out = doctor_markdown(fake_nvml, home, [], lib_dir=tmp_path)
    assert "| NVML | no-library: the NVIDIA management library" in out
    assert "### GPUs" not in out and "### Next steps" in out


def test_one_nvml_session_and_gpu_reads_no_health(fake_nvml: FakeNvml, home: Path,
                                                  tmp_path: Path) -> None:
    """`gpu` reads no health; doctor and the gate read level 1 (issue 20: level 2 is level 1
    plus the env's checks, and the gate re-reads level 1 whenever it may need a GPU), in
    their one NVML session."""
    trace = tmp_path / "trace"
    doctor_markdown(fake_nvml, home, [HEALTHY], FAKE_NVML_TRACE=str(trace))
    calls = trace.read_text().split()
    assert calls.count("nvmlInitWithFlags") + calls.count("nvmlInit_v2") == 1
    assert HEALTH_FUNCTIONS <= set(calls)
    for args, health in ((["gpu", "--json"], False), (["doctor", "--no-smoke"], True), (["check"], True)):
        trace.unlink(missing_ok=True)
        fake_nvml.cli(fake_nvml.env([HEALTHY], ENVCHECK_HOME=str(home), FAKE_NVML_TRACE=str(trace)), *args)
        calls = trace.read_text().split()
        assert "nvmlDeviceGetName" in calls and bool(HEALTH_FUNCTIONS & set(calls)) == health, args
        assert calls.count("nvmlInitWithFlags") + calls.count("nvmlInit_v2") == 1, args


def test_markdown_and_json_together_is_bad_usage(fake_nvml: FakeNvml, home: Path) -> None:
    result = fake_nvml.cli(fake_nvml.env([HEALTHY], ENVCHECK_HOME=str(home)),
                           "doctor", "--markdown", "--json")
    assert result.code == 2 and result.out == ""
    assert "--markdown and --json" in result.err and "Traceback" not in result.err
    assert list(home.iterdir()) == []


def test_every_view_is_listed_once_by_form_and_markdown_is_its_own():
    """``cli/views/__init__.py`` names each result class and its renderer; both exist."""
    import importlib

    from envcheck.cli import views

    for form, listed in views.VIEWS.items():
        for result, renderer in listed.items():
            module, cls = result.split(":")
            assert isinstance(getattr(importlib.import_module(module), cls), type), (form, result)
            module, function = renderer.split(":")
            assert callable(getattr(importlib.import_module(f"envcheck.cli.views.{module}"), function))
    assert "envcheck.usecases.bugreport:BugReport" in views.MARKDOWN
    assert "envcheck.usecases.bugreport:BugReport" not in views.TEXT


def test_format_names_the_form_once_and_refuses_two(fake_nvml: FakeNvml, home: Path) -> None:
    """`--format markdown` is `--markdown`; two spellings of different forms are exit 2."""
    env = fake_nvml.env([HEALTHY], ENVCHECK_HOME=str(home))
    for args in (("--format", "markdown", "--json"), ("--markdown", "--format", "text")):
        result = fake_nvml.cli(env, "doctor", "--no-smoke", *args)
        assert result.code == 2 and result.out == "" and "are two forms of one report" in result.err
    result = fake_nvml.cli(env, "doctor", "--no-smoke", "--format", "markdown")
    assert result.code in (0, 1) and result.out.startswith("## envcheck doctor"), result.err


def test_it_carries_what_collect_env_does_with_user_names_redacted(fake_nvml: FakeNvml, home: Path,
                                                                    tmp_path: Path) -> None:
    prefix = tmp_path / "home" / "alice" / "miniconda3" / "envs" / "train"
    (prefix / "conda-meta").mkdir(parents=True)
    for name, version_ in (("cudatoolkit", "11.8.0"), ("cudnn", "8.9.2.26"), ("python", "3.11.7"), ("torch", "2.1.0")):
        (prefix / "conda-meta" / f"{name}-{version_}-h0_0.json").write_text(
            json.dumps({"name": name, "version": version_, "build": "h0_0", "channel": "conda-forge"}))
    out = doctor_markdown(fake_nvml, home, [HEALTHY], CONDA_PREFIX=str(prefix), HOME=str(tmp_path / "home" / "alice"))
    rows = {cells(line)[0]: cells(line)[1] for line in out.split("### GPUs")[0].splitlines() if line.startswith("| ")}
    for item in ("CPU", "OS", "C library", "GCC", "Clang", "CMake", "CUDA toolkit (nvcc)",
                 "CUDA runtime (host libcudart)", "cuDNN (host libcudnn)", "conda env"):
        assert rows.get(item), (item, rows)
    assert "logical CPUs" in rows["CPU"] and rows["C library"].startswith("glibc")
    assert "cudatoolkit 11.8.0" in rows["conda env"] and "cudnn 8.9.2.26" in rows["conda env"]
    assert "torch 2.1.0" in rows["conda env"] and "python 3.11.7" not in rows["conda env"]
    assert "alice" not in out and "~/miniconda3/envs/train" in rows["conda env"]
