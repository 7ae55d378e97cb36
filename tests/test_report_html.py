"""`envcheck report` and `doctor --html`: the stored validations as text, JSON and one HTML page,
the page opened in headless Chromium (Debian's `chromium`, driven by Playwright).

The reports are made by real `envcheck validate` runs against the fake NVML (two A100s, one
of them with markup for a name): env `hostile` is a stand-in TensorFlow whose import fails
with a markup-laden error, validated for real; env `tfgpu` is validated by the real
`validate` code with only the smoke runner's fit stood in (it needs a GPU framework), so its
stored report has per-device ms/step, the speedup over the CPU and a multi-replica check as
validate computes them from the fit. `fresh` was never validated; `corrupt`'s report file
is garbage.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Result, clean_env
from fake_nvml import A100, FakeNvml
from wheelhouse import build_wheel

pytestmark = pytest.mark.timeout(600)

HOSTILE = '<b id="pwned">x</b></script><script>document.title="pwned"</script>'
HOSTILE_GPU = '<i id="pwned-gpu">A100</i>'
GPUS = [A100, f"{HOSTILE_GPU},8.0,81920"]
ENVS = ["corrupt", "fresh", "hostile", "tfgpu"]
PLOT_W = 360  # views.report's bar length for the longest bar

GPU_PRESET = """title = "TensorFlow GPU stand-in"
kind = "gpu"
framework = "tensorflow"
packages = ["tensorflow==2.21.0"]

[gpu]
cuda = "12.5"
cudnn = "9.3"
"""
CPU_PRESET = """title = "TensorFlow CPU stand-in"
kind = "cpu"
framework = "tensorflow"
packages = ["tensorflow-cpu==2.21.0"]
"""
# The real validate-and-store, with only the fit stood in: what the smoke runner answers on a
# host with a CPU and two GPUs (ms/step per device by the runner's names, a 2-GPU replica run).
VALIDATE_WITH_FIT = """
import sys
from envcheck.paths import Home
from envcheck.usecases.session import Session
from envcheck.validation import smoke
from envcheck.validation.smoke import DeviceResult, MultiReplica, SmokeResult

MS = {"cpu:0": 41.37, "gpu:0": 2.95, "gpu:1": 3.41}
BUILD = {"framework": "tensorflow", "version": "2.21.0", "is_cuda_build": True,
         "cuda_version": "12.5.1", "cudnn_version": "9", "keras_backend": "tensorflow"}


def run_smoke(python, devices, *, multi_replica=False, **_):
    results = [DeviceResult(d, "pass", MS[d], 0.9132, 0.1417, placed_on=d.upper()) for d in devices]
    multi = MultiReplica("pass", 2, 32, 64, 0.78, 3.78, "the replicas agree after training", 16931.2)
    return SmokeResult(BUILD, 2, results, multi if multi_replica else None, None, "", 1.9)


smoke.run_smoke = run_smoke
session = Session(Home(sys.argv[1]))
report = session.validate_and_store(session.store.get(sys.argv[2]))
assert report.speedup and report.multi_replica, report
"""


def run(env: dict[str, str], *args: str) -> Result:
    proc = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True, text=True,
                          env=env, timeout=300)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def create(home: Path, tmp: Path, name: str, preset: str, wheel: tuple[str, str]) -> None:
    wheels = tmp / f"wheels-{name}"
    build_wheel(wheels, wheel[0], "2.21.0", files={"tensorflow/__init__.py": wheel[1]})
    (tmp / f"{name}.toml").write_text(preset)
    r = run(clean_env(ENVCHECK_HOME=str(home)), "env", "create", name, "--preset-file", str(tmp / f"{name}.toml"),
            "--for-another-host", "--no-index", "--find-links", str(wheels))
    assert r.code == 0, r.err


@pytest.fixture(scope="module")
def reports(tmp_path_factory, fake_nvml: FakeNvml) -> tuple[Path, dict[str, str]]:
    """The home with the four envs and their stored reports, and the fake-NVML environment
    they were validated in."""
    tmp = tmp_path_factory.mktemp("report")
    home = tmp / "home"
    standin = "raise ImportError('stand-in: metadata only')\n"
    create(home, tmp, "tfgpu", GPU_PRESET, ("tensorflow", standin))
    create(home, tmp, "hostile", CPU_PRESET, ("tensorflow-cpu", f"raise ImportError({HOSTILE!r})\n"))
    create(home, tmp, "fresh", CPU_PRESET, ("tensorflow-cpu", standin))
    create(home, tmp, "corrupt", CPU_PRESET, ("tensorflow-cpu", standin))
    env = fake_nvml.env(GPUS, ENVCHECK_HOME=str(home))
    r = run(env, "validate", "hostile")
    assert r.code == 1 and HOSTILE in r.out, (r.out, r.err)
    proc = subprocess.run([sys.executable, "-c", VALIDATE_WITH_FIT, str(home), "tfgpu"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (home / "envs" / "corrupt" / "envcheck-report.json").write_text("{not json")
    return home, env


def stored(home: Path, name: str) -> dict:
    """The report as validate stored it, read straight from its file."""
    return json.loads((home / "envs" / name / "envcheck-report.json").read_text())


def test_json_lists_each_env_with_its_stored_report_or_why_it_has_none(reports):
    home, env = reports
    r = run(env, "report", "--all", "--json")
    assert r.code == 1, r.err  # hostile is not ready, fresh and corrupt have no report
    doc = r.json()
    assert doc["schema"] == "envcheck.reports/1" and doc["host"]["driver_version"] == "550.54.15"
    by_name = {e["name"]: e for e in doc["envs"]}
    assert list(by_name) == ENVS
    gpu = by_name["tfgpu"]
    assert gpu["current"] is True and gpu["changed"] == [] and gpu["report"]["verdict"] == "ready"
    assert gpu["report"] == stored(home, "tfgpu")
    assert by_name["fresh"]["report"] is None and by_name["fresh"]["missing"] == "never validated"
    assert by_name["corrupt"]["report"] is None and "unreadable" in by_name["corrupt"]["missing"]
    assert doc["summary"] == {"envs": 4, "ready": 1, "degraded": 0, "not_ready": 1, "no_report": 2,
                              "out_of_date": 0}


def test_text_shows_each_report_and_says_when_there_is_none(reports):
    _, env = reports
    r = run(env, "report", "tfgpu", "fresh")
    assert r.code == 1
    assert "env fresh: never validated; fix: envcheck validate fresh" in r.out
    assert "nothing it depends on changed since" in r.out and "GPU over CPU speedup: gpu:0 14.0x, gpu:1 12.1x" in r.out
    assert run(env, "report", "tfgpu").code == 0


def test_a_report_of_another_driver_and_gpus_is_out_of_date(reports, tmp_path):
    home, _ = reports
    no_nvml = clean_env(ENVCHECK_HOME=str(home), LD_LIBRARY_PATH=str(tmp_path))
    r = run(no_nvml, "report", "tfgpu", "--json")
    [gpu] = r.json()["envs"]
    assert gpu["current"] is False and gpu["changed"] == ["driver_version", "gpu_uuids", "cuda_visible"]
    text = run(no_nvml, "report", "tfgpu").out
    assert "out of date: NVIDIA driver, GPUs, the GPUs CUDA sees (CUDA_VISIBLE_DEVICES) changed since; " \
           "fix: envcheck validate tfgpu" in text


@pytest.mark.parametrize("target", ["missing-folder/r.html", "."])
def test_a_bad_html_path_is_a_usage_error_and_writes_nothing(reports, tmp_path, target):
    _, env = reports
    before = sorted(tmp_path.iterdir())
    r = run(env, "report", "--all", "--html", str(tmp_path / target))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "--html" in r.err and "fix:" in r.err
    assert sorted(tmp_path.iterdir()) == before


def test_the_html_file_is_replaced_whole(reports, tmp_path):
    _, env = reports
    page = tmp_path / "report.html"
    page.write_text("old")
    r = run(env, "report", "--all", "--html", str(page))
    assert r.code == 1 and r.out == "" and f"wrote {page}" in r.err
    assert page.read_text().startswith("<!DOCTYPE html>") and [p.name for p in tmp_path.iterdir()] == ["report.html"]
    with_json = run(env, "report", "--all", "--html", str(page), "--json")
    assert with_json.json()["schema"] == "envcheck.reports/1"


def test_format_html_prints_the_page_the_html_option_writes(reports, tmp_path):
    """`--format html`: the page on stdout, the exit code the same; with `--html FILE` too, the
    file holds the same page (but for when it was made)."""
    _, env = reports
    page = tmp_path / "report.html"
    printed = run(env, "report", "--all", "--format", "html", "--html", str(page))
    assert printed.code == 1 and printed.out.startswith("<!DOCTYPE html>") and f"wrote {page}" in printed.err
    same = [line for line in printed.out.splitlines() if "generated" not in line]
    assert same == [line for line in page.read_text().splitlines() if "generated" not in line]
    alone = run(env, "report", "--all", "--format", "html")
    assert alone.code == 1 and alone.out.startswith("<!DOCTYPE html>") and alone.err == ""
    both = run(env, "report", "--all", "--format", "html", "--json")
    assert both.code == 2 and "two forms of one report" in both.err and both.out == ""


# -- the page in a browser --------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    """Headless Chromium, or a skip saying why there is none."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("no chromium on PATH: install Debian's chromium package (.ci/run does, as root)")
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed: pip install -e '.[test]'")
    with sync_playwright() as playwright:
        try:
            chromium = playwright.chromium.launch(executable_path=executable)
        except Error as exc:
            pytest.skip(f"{executable} does not start headless: {str(exc).splitlines()[0]}")
        yield chromium
        chromium.close()


def open_page(browser, path: Path):
    """The page loaded from ``path`` with every request recorded; any that is not the file
    itself is aborted, and listed."""
    page = browser.new_page()
    outside: list[str] = []

    def route(request_route):
        url = request_route.request.url
        if url == path.as_uri():
            request_route.continue_()
        else:
            outside.append(url)
            request_route.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    return page, outside


def cells(page, selector: str) -> list[list[str]]:
    return page.eval_on_selector_all(
        selector, "rows => rows.map(r => Array.from(r.cells, c => c.firstChild ? c.firstChild.textContent.trim() : ''))")


def test_the_page_shows_the_stored_reports_and_fetches_nothing(reports, browser, tmp_path):
    home, env = reports
    path = tmp_path / "report.html"
    assert run(env, "report", "--all", "--html", str(path)).code == 1
    page, outside = open_page(browser, path)

    # The devices table: one row per stored device, its ms/step and speedup over the CPU.
    gpu = stored(home, "tfgpu")
    rows = cells(page, 'section[data-env="tfgpu"] table.devices tbody tr')
    ratio = gpu["speedup"]["gpu_over_cpu"]
    assert [r[0] for r in rows] == [d["device"] for d in gpu["devices"]] == ["cpu:0", "gpu:0", "gpu:1"]
    assert [r[2] for r in rows] == [f"{d['ms_per_step']:.2f}" for d in gpu["devices"]]
    assert [r[3] for r in rows] == ["1.00× (baseline)", f"{ratio['gpu:0']:.2f}×", f"{ratio['gpu:1']:.2f}×"]

    # The chart: one bar per device, each as long as its ms/step on one scale.
    bars = page.eval_on_selector_all(
        'section[data-env="tfgpu"] svg.speed g.device',
        "gs => gs.map(g => { const b = g.querySelector('rect').getBBox();"
        " return [g.dataset.device, b.width, b.height]; })")
    assert [b[0] for b in bars] == ["cpu:0", "gpu:0", "gpu:1"] and all(b[2] > 0 for b in bars)
    longest = max(d["ms_per_step"] for d in gpu["devices"])
    for (_, width, _), device in zip(bars, gpu["devices"]):
        assert width == pytest.approx(device["ms_per_step"] / longest * PLOT_W, abs=0.01)
    assert page.eval_on_selector('section[data-env="tfgpu"] svg.speed', "s => s.getBoundingClientRect().height") > 0

    # Multi-replica scaling: the efficiency, and its bar against the ideal.
    eff = gpu["multi_replica"]["scaling_efficiency"]
    assert page.text_content('section[data-env="tfgpu"] td.efficiency') == f"{eff:.2f}"
    bar, track = page.eval_on_selector_all('section[data-env="tfgpu"] svg.scaling rect',
                                           "rs => rs.map(r => r.getBBox().width)")[::-1]
    assert bar / track == pytest.approx(eff, abs=1e-4)

    # Verdicts and checks with their fixes; an env without a report is not a pass.
    summary = {r[0]: r[2] for r in cells(page, "section#envs tbody tr")}
    assert summary == {"corrupt": "never validated", "fresh": "never validated", "hostile": "not-ready",
                       "tfgpu": "ready"}
    checks = {r[0]: r for r in cells(page, 'section[data-env="hostile"] table.checks tbody tr')}
    smoke = next(c for c in stored(home, "hostile")["checks"] if c["id"] == "smoke")
    assert checks["smoke"][1] == "fail" and checks["smoke"][2] == smoke["summary"] and checks["smoke"][3] == smoke["fix"]
    assert "No stored report (never validated)" in page.text_content('section[data-env="fresh"]')

    # The host: the driver, CUDA and each GPU.
    facts = dict(page.eval_on_selector_all("section#host table.facts tr",
                                           "rs => rs.map(r => [r.cells[0].textContent, r.cells[1].textContent])"))
    assert facts["NVIDIA driver"] == "550.54.15" and facts["CUDA (driver)"] == "12.4"
    assert [r[1] for r in cells(page, "table#gpus tbody tr")] == ["NVIDIA A100-SXM4-80GB", HOSTILE_GPU]

    # Markup from a GPU name or a framework's error is text, never elements.
    assert page.evaluate("document.querySelectorAll('#pwned, #pwned-gpu').length") == 0
    assert page.title() != "pwned" and HOSTILE in checks["smoke"][2]

    # The data, embedded whole: the same document `report --json` prints.
    embedded = json.loads(page.text_content("script#envcheck-data"))
    printed = run(env, "report", "--all", "--json").json()
    assert {**embedded, "generated": None} == {**printed, "generated": None}

    # Nothing left the page, and the page forbids it.
    assert outside == []
    csp = page.get_attribute('meta[http-equiv="Content-Security-Policy"]', "content")
    assert "default-src 'none'" in csp
    raw = path.read_text()
    assert HOSTILE not in raw and HOSTILE_GPU not in raw and "http://" not in raw.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")


def test_doctor_writes_the_page_with_its_next_steps(reports, browser, tmp_path):
    _, env = reports
    path = tmp_path / "doctor.html"
    r = run(env, "doctor", "--no-smoke", "--html", str(path))
    assert r.code in (0, 1) and "next steps:" in r.out and f"wrote {path}" in r.err, r.err
    page, outside = open_page(browser, path)
    steps = page.eval_on_selector_all("section#next-steps li", "lis => lis.map(li => li.textContent)")
    assert steps and all(step in r.out for step in steps)
    assert page.eval_on_selector_all("section.env", "s => s.map(e => e.dataset.env)") == ENVS
    assert outside == []
    # --format html: that page on stdout, with doctor's exit code and next steps (the first run
    # stored a failure for tfgpu, so from here on doctor chooses another env: the same each time)
    printed = run(env, "doctor", "--no-smoke", "--format", "html")
    answer = run(env, "doctor", "--no-smoke", "--json")
    assert printed.code == answer.code and printed.out.startswith("<!DOCTYPE html>"), printed.err
    stdout_page = tmp_path / "stdout.html"
    stdout_page.write_text(printed.out)
    page, outside = open_page(browser, stdout_page)
    shown = page.eval_on_selector_all("section#next-steps li", "lis => lis.map(li => li.textContent)")
    assert shown == answer.json()["next_steps"]
    assert page.eval_on_selector_all("section.env", "s => s.map(e => e.dataset.env)") == ENVS
    assert outside == []
