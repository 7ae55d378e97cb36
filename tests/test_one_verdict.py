"""One verdict, whatever the view (issue 27): the same facts give the same word in text, JSON,
Markdown and HTML. Four sets of facts, each read through the real pynvml from the fake NVML
(or no NVML at all): a CPU host, eight healthy GPUs, eight GPUs of which one has uncorrected ECC
errors, and an env that drifted since its validation."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from fake_nvml import A100, FakeNvml
from test_select import make_env

pytestmark = pytest.mark.timeout(600)

HEALTHY = A100 + ",ecc=0/0"
FAULTY = A100 + ",ecc=3/3"  # uncorrected ECC errors: not-ready, drain it


def visible(page: str) -> str:
    """An HTML page's visible text (no style sheet, no embedded data), tags stripped."""
    page = re.sub(r"<style>.*?</style>|<script.*?</script>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def views(fake_nvml: FakeNvml, env: dict[str, str]) -> dict[str, str]:
    """doctor in every form, and gpu --level 1 as text and JSON."""
    out = {}
    for form in ("text", "json", "markdown", "html"):
        r = fake_nvml.cli(env, "doctor", "--no-smoke", "--format", form)
        assert "Traceback" not in r.err and r.code in (0, 1), r.err
        out[form] = visible(r.out) if form == "html" else r.out
    out["gpu-text"] = fake_nvml.cli(env, "gpu", "--level", "1").out
    out["gpu-json"] = fake_nvml.cli(env, "gpu", "--level", "1", "--json").out
    return out


def md_gpu_health(markdown: str) -> list[str]:
    rows = markdown.split("### GPUs")[1].split("\n\n")[1].splitlines()[2:]
    return [row.strip("|").split("|")[-1].strip() for row in rows]


@pytest.fixture(scope="module")
def home(tmp_path_factory, wheelhouse) -> Path:
    home = tmp_path_factory.mktemp("one-verdict")
    make_env(home, wheelhouse, "tf", "tensorflow-cpu==2.21.0")
    return home


def test_a_cpu_host_is_no_gpu_in_every_view(fake_nvml: FakeNvml, home: Path, tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()  # no device node
    env = fake_nvml.env([], lib_dir=tmp_path, ENVCHECK_HOME=str(home), ENVCHECK_TEST_DEV_DIR=str(dev))
    got = views(fake_nvml, env)
    assert json.loads(got["json"])["envelope"]["node"]["health"]["verdict"] == "no-gpu"
    assert json.loads(got["json"])["envelope"]["verdict"] == "ready"  # a CPU env is ready on a CPU host
    assert json.loads(got["gpu-json"])["verdict"] == "no-gpu"
    for form in ("text", "markdown", "html", "gpu-text"):
        assert "no-gpu" in got[form] and "not-ready" not in got[form], (form, got[form])
    for form in ("text", "markdown"):
        assert got[form].count("if this host should have an NVIDIA GPU") == 1, form


def test_eight_healthy_gpus_read_as_eight_gpus(fake_nvml: FakeNvml, home: Path) -> None:
    env = fake_nvml.env([HEALTHY] * 8, ENVCHECK_HOME=str(home))
    got = views(fake_nvml, env)
    assert "8 × NVIDIA A100-SXM4-80GB (cc 8.0): 0-7" in got["text"].splitlines()[0]
    assert json.loads(got["json"])["envelope"]["node"]["health"] == {"verdict": "ready", "drain": []}
    assert [g["verdict"] for g in json.loads(got["gpu-json"])["gpus"]] == ["ready"] * 8
    assert md_gpu_health(got["markdown"]) == ["ready"] * 8
    assert "not-ready" not in got["html"] and got["html"].count(" ready ") >= 8


def test_a_faulty_gpu_is_not_ready_in_every_view(fake_nvml: FakeNvml, home: Path) -> None:
    env = fake_nvml.env([HEALTHY] * 3 + [FAULTY] + [HEALTHY] * 4, ENVCHECK_HOME=str(home))
    got = views(fake_nvml, env)
    health = json.loads(got["json"])["envelope"]["node"]["health"]
    assert health["verdict"] == "not-ready" and [d["gpu"] for d in health["drain"]] == [3]
    assert [g["verdict"] for g in json.loads(got["gpu-json"])["gpus"]] == ["ready"] * 3 + ["not-ready"] + ["ready"] * 4
    assert md_gpu_health(got["markdown"]) == ["ready"] * 3 + ["not-ready"] + ["ready"] * 4
    assert re.search(r"GPU 3 \(NVIDIA A100-SXM4-80GB GPU-\S+\): not-ready", got["gpu-text"])
    row = re.search(r"\b3\s+NVIDIA A100-SXM4-80GB.*?yes \(cuda:3\)", got["html"], re.S).group(0)  # its row
    assert "not-ready" in row and "ok" in row  # its health, beside NVML's answer


def test_a_drifted_env_is_drifted_in_every_view(fake_nvml: FakeNvml, home: Path, wheelhouse: Path) -> None:
    make_env(home, wheelhouse, "zz-old", "tensorflow-cpu==2.21.0")  # after tf: doctor validates tf
    env = fake_nvml.env([], lib_dir=wheelhouse, ENVCHECK_HOME=str(home))
    assert fake_nvml.cli(env, "validate", "zz-old", "--no-smoke").code == 0
    site = next((home / "envs" / "zz-old" / "lib").glob("python*/site-packages"))
    (site / "planted.py").write_text("x = 1\n")  # the env changed behind envcheck's back
    select = fake_nvml.cli(env, "select", "--json")
    ranked = {r["name"]: r for r in json.loads(select.out)["ranking"]}
    assert ranked["zz-old"]["validation"] == "drifted"
    assert re.search(r"zz-old\s+cpu\s+drifted", fake_nvml.cli(env, "select").out)
    report = json.loads(fake_nvml.cli(env, "report", "zz-old", "--json").out)
    assert report["envs"][0]["validation"] == "drifted"
    assert "drifted: " in fake_nvml.cli(env, "report", "zz-old").out
    assert "drifted" in visible(fake_nvml.cli(env, "report", "zz-old", "--format", "html").out)
    markdown = fake_nvml.cli(env, "doctor", "--no-smoke", "--markdown").out
    rows = [line for line in markdown.split("### Envs")[1].splitlines() if line.startswith("| zz-old ")]
    assert rows and "| drifted (ready;" in rows[0]
    # tf was validated by the doctor on other GPUs in the tests above: the host changed, not tf
    assert ranked["tf"]["validation"] == "out of date"
