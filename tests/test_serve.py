"""`envcheck serve`, `envcheck metrics --textfile` and `envcheck labels -o` as real processes.

A real Prometheus (Debian's ``prometheus`` package; .ci/run installs it where it can) scrapes
`envcheck serve` on free ports, on a host of fake GPUs (the fake NVML), and the values are read
back through its HTTP API and checked against the stored reports, before and after the
exporter's own revalidation (the driver changed since an env's validation) changes a verdict.
Then: concurrent textfile writers never leave a torn file; bad ports and binds exit 2 with
nothing written; SIGTERM, while a validation child runs, stops the exporter and leaves no child;
HEAD, and requests whose bodies look like requests, sent on a raw socket.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from envcheck.host.probe import Gpu, HostState
from envcheck.paths import Home
from envcheck.usecases.session import env_store
from envcheck.validation.reports import Check, Report, fingerprint, store_report
from fake_nvml import A100
from test_select import make_env

pytestmark = pytest.mark.timeout(600)
DRIVER = "550.54.15"


def fake_host(probed: dict, driver: str = DRIVER) -> HostState:
    """The host the fake NVML shows, as a stored report's fingerprint sees it."""
    gpus = [Gpu(g["index"], name=g["name"], uuid=g["uuid"]) for g in probed["host"]["gpus"]]
    return HostState("ok", driver_version=driver, cuda_driver_version="12.4", gpus=gpus)


def store(home: Path, name: str, verdict: str, host: HostState, devices: list | None = None) -> None:
    info = env_store(Home(home)).get(name)
    status = {"ready": "pass", "degraded": "warn", "not-ready": "fail"}[verdict]
    created = (datetime.now(timezone.utc) - timedelta(minutes=5)).isoformat()
    store_report(Home(home), Report(name, verdict, [Check("smoke", status, "fit")], devices or [], None, None, {},
                                    host.to_json(), fingerprint(info, host), created, 1.0, True, depth="smoke"))


@pytest.fixture(scope="module")
def served_home(tmp_path_factory, wheelhouse) -> Path:
    home = tmp_path_factory.mktemp("serve-home")
    for name in ("good", "meh", "moved", "never"):
        make_env(home, wheelhouse, name, "tensorflow==2.21.0")
    return home


@pytest.fixture
def node(served_home, fake_nvml):
    """(the exporter's environment, the home): two fake A100s; env good stored ready, meh
    degraded, moved ready but on driver 535 (stale: the exporter revalidates it), never none."""
    env = fake_nvml.env([A100, A100], FAKE_NVML_DRIVER=DRIVER, FAKE_NVML_CUDA="12040",
                        ENVCHECK_HOME=str(served_home))
    host = fake_host(fake_nvml.probe(env))
    store(served_home, "good", "ready", host, [{"device": "gpu:0", "status": "pass", "ms_per_step": 20.0}])
    store(served_home, "meh", "degraded", host)
    store(served_home, "moved", "ready", fake_host(fake_nvml.probe(env), driver="535.104.05"))
    yield env, served_home
    for name in ("good", "meh", "moved"):
        Home(served_home).report(name).unlink(missing_ok=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(env: dict, *args: str) -> tuple[subprocess.Popen, int]:
    """`envcheck serve --port 0 ARGS` and the port it says it bound."""
    proc = subprocess.Popen([sys.executable, "-m", "envcheck", "serve", "--port", "0", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    assert "serving http://127.0.0.1:" in line, line + proc.stderr.read()
    return proc, int(line.split("127.0.0.1:")[1].split("/")[0])


def get(url: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=30)


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# -- a real Prometheus -------------------------------------------------------------------------

class Prometheus:
    def __init__(self, target: int, folder: Path):
        self.port = free_port()
        config = folder / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 250ms\n  evaluation_interval: 1s\nscrape_configs:\n"
                          f"  - job_name: envcheck\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n")
        self.log = open(folder / "prometheus.log", "w")
        self.proc = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self._until(lambda: get(f"http://127.0.0.1:{self.port}/-/ready", 2) is not None, 60, "ready")

    def query(self, expr: str) -> dict[tuple, float]:
        """{(sorted labels but __name__ and Prometheus's own): value} of an instant query."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        data = json.loads(get(url))
        assert data["status"] == "success", data
        return {tuple(sorted((k, v) for k, v in r["metric"].items() if k not in ("__name__", "instance", "job"))):
                float(r["value"][1]) for r in data["data"]["result"]}

    def wait_for(self, expr: str, check, timeout: float = 120) -> dict:
        found = {}

        def matches():
            nonlocal found
            found = self.query(expr)
            return check(found)
        self._until(matches, timeout, f"{expr} as expected (last: {found})")
        return found

    def _until(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if condition():
                    return
            except OSError:
                pass
            assert self.proc.poll() is None, "prometheus exited; see its log"
            time.sleep(0.1)
        raise AssertionError(f"prometheus: not {what} within {timeout}s")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        self.log.close()
        assert not alive(self.proc.pid)


def needs_prometheus() -> None:
    if shutil.which("prometheus") is None:
        pytest.skip("Debian's prometheus is not installed (apt-get install prometheus; .ci/run installs it as root)")


def test_prometheus_scrapes_the_stored_verdicts_and_a_revalidation_changes_one(node, tmp_path):
    needs_prometheus()
    env, home = node
    host = fake_host({"host": json.loads(Home(home).report("good").read_text())["host"]})
    exporter, port = start_serve(env)
    prometheus = Prometheus(port, tmp_path)
    try:
        def ready_of(found):
            return {dict(k)["env"]: (dict(k)["verdict"], v) for k, v in found.items()}

        first = ready_of(prometheus.wait_for("envcheck_env_ready", lambda f: len(f) == 4))
        assert {k: first[k] for k in ("good", "meh", "never")} == {
            "good": ("ready", 1.0), "meh": ("degraded", 1.0), "never": ("never-validated", 0.0)}
        assert first["moved"] in {("stale", 0.0), ("not-ready", 0.0), ("ready", 1.0)}
        steps = prometheus.wait_for("envcheck_smoke_seconds_per_step", bool)
        assert steps == {(("device", "gpu:0"), ("env", "good")): 0.02}
        assert prometheus.wait_for("envcheck_driver_info", bool) == {(("cuda", "12.4"), ("driver", DRIVER)): 1.0}
        health = prometheus.wait_for("envcheck_gpu_health", bool)
        assert {(dict(k)["gpu"], dict(k)["uuid"]) for k in health} == {(str(g.index), g.uuid) for g in host.gpus}
        assert all(v == 1.0 for k, v in health.items() if dict(k)["check"] == "ecc")
        # the exporter saw env moved validated on another driver, and validated it again itself:
        # its verdict is now the new report's, no longer stale
        after = prometheus.wait_for("envcheck_env_report_stale", lambda f: f.get((("env", "moved"),)) == 0.0)
        assert after[(("env", "good"),)] == 0.0
        stored = json.loads(Home(home).report("moved").read_text())
        assert stored["host"]["driver_version"] == DRIVER
        now = ready_of(prometheus.wait_for("envcheck_env_ready", lambda f: ready_of(f)["moved"][0] != "stale"))
        assert now["moved"] == (stored["verdict"], 1.0 if stored["verdict"] in ("ready", "degraded") else 0.0)
        # a validation run by hand changes a verdict too: good's stored pass replaced by what the
        # stand-in framework (metadata only, not importable) really gets
        subprocess.run([sys.executable, "-m", "envcheck", "validate", "good", "--json"], env=env,
                       capture_output=True, text=True, timeout=300)
        verdict = json.loads(Home(home).report("good").read_text())["verdict"]
        assert verdict == "not-ready"
        changed = ready_of(prometheus.wait_for("envcheck_env_ready", lambda f: ready_of(f)["good"][0] == verdict))
        assert changed["good"] == ("not-ready", 0.0)
    finally:
        prometheus.stop()
        assert stop(exporter) == 0
    assert exporter.stderr.read().count("validating env moved") == 1


def test_sigterm_stops_the_exporter_and_its_validation_child(node):
    env, home = node
    exporter, port = start_serve(env)
    assert get(f"http://127.0.0.1:{port}/healthz") == "ok\n"
    line = exporter.stderr.readline()  # the loop found env moved stale and started its validation
    assert "validating env moved" in line, line
    deadline = time.monotonic() + 30
    while not (children := descendants(exporter.pid)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert children, "the validation child did not start"
    assert stop(exporter) == 0
    assert not [pid for pid in children | descendants(exporter.pid) if alive(pid)]
    with pytest.raises(OSError):
        get(f"http://127.0.0.1:{port}/healthz", 2)


@pytest.mark.parametrize("args, says", [
    (("--port", "65536"), "--port"), (("--port", "-1"), "--port"), (("--port", "http"), "--port"),
    (("--bind", "no.such.host.invalid"), "--bind"), (("--bind", "192.0.2.1"), "can't listen on 192.0.2.1"),
    (("--bind", ""), "--bind '' is no address"), (("--bind", " "), "--bind ' ' is no address"),
    (("--bind", "0"), "--bind '0' would listen on every interface"),  # said only as 0.0.0.0 or ::
    (("--revalidate-every", "soon"), "bad age"), (("--revalidate-every", "0h"), "bad age"),
])
def test_bad_ports_and_binds_exit_2_with_nothing_written(cli, home, args, says):
    r = cli("serve", *args, timeout=60)
    assert r.code == 2 and r.out == "" and says in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert "Traceback" not in r.err and list(home.iterdir()) == []


def test_a_port_in_use_exits_2(cli, home):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        r = cli("serve", "--port", str(taken.getsockname()[1]), timeout=60)
    assert r.code == 2 and "is in use" in r.err and r.out == "", r.err


def test_unknown_paths_404_and_healthz_answers(node):
    env, _ = node
    exporter, port = start_serve(env, "--no-revalidate")
    try:
        with pytest.raises(urllib.error.HTTPError) as missing:
            get(f"http://127.0.0.1:{port}/nope")
        assert missing.value.code == 404
        text = get(f"http://127.0.0.1:{port}/metrics")
        assert 'envcheck_env_ready{env="moved",framework="tensorflow",variant="",verdict="stale"} 0.0' in text
    finally:
        assert stop(exporter) == 0


def exchange(port: int, data: bytes) -> bytes:
    """``data`` sent on one connection; everything the exporter answers until it closes it."""
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(data)
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def statuses(answer: bytes) -> list[int]:
    return [int(code) for code in re.findall(rb"^HTTP/1\.1 (\d{3}) ", answer, re.MULTILINE)]


FAKE = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"  # a body that looks like a request
LAST = b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"  # a real one after it


def test_head_answers_with_headers_and_no_body_and_a_body_is_never_a_request(node):
    """RFC 9110: HEAD is GET's status and headers without the body. A request's body is read (a
    pipelined request after it is then answered) or the connection closed after the answer: its
    bytes are never answered as a request of their own."""
    env, _ = node
    exporter, port = start_serve(env, "--no-revalidate")
    try:
        head = exchange(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
                              b"HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        metrics, healthz, rest = head.split(b"\r\n\r\n")
        assert statuses(head) == [200, 200] and rest == b""  # no body after either
        assert b"Content-Type: text/plain; version=0.0.4" in metrics and b"Content-Length: 3" in healthz
        assert int(re.search(rb"Content-Length: (\d+)", metrics)[1]) > 0

        read = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(FAKE)
                        + FAKE + LAST)
        assert statuses(read) == [200, 404] and b"envcheck_" not in read
        for unread in (b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(FAKE), FAKE),
                       b"Content-Length: 1000000\r\n\r\n" + FAKE):  # longer than the exporter reads
            closed = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + unread)
            assert statuses(closed) == [200] and b"Connection: close" in closed and closed.endswith(b"\r\n\r\nok\n")
        posted = exchange(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(FAKE)
                          + FAKE)
        assert statuses(posted) == [501] and b"envcheck_" not in posted
    finally:
        assert stop(exporter) == 0


def test_connections_kept_alive_do_not_hold_up_other_scrapers(node):
    """Prometheus keeps its connection open between scrapes; the exporter still answers other
    scrapers while such connections idle, and while more connections than its pool of handler
    threads were opened and left silent."""
    import http.client

    env, _ = node
    exporter, port = start_serve(env, "--no-revalidate")
    idle = []
    silent = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(10)]
    try:
        for _ in range(3):  # three scrapers, each keeping its connection after one scrape
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/metrics")
            answer = conn.getresponse()
            assert answer.status == 200 and b"envcheck_env_ready" in answer.read()
            idle.append(conn)
        for conn in idle:  # and each scrapes again on the connection it kept
            conn.request("GET", "/healthz")
            assert conn.getresponse().read() == b"ok\n"
        assert "envcheck_build_info" in get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    finally:
        for conn in idle + silent:
            conn.close()
        assert stop(exporter) == 0


# -- the textfile and the labels file ----------------------------------------------------------

def test_concurrent_textfile_writers_never_leave_a_torn_file(node, tmp_path):
    env, _ = node
    folder = tmp_path / "textfile"
    folder.mkdir()
    target = folder / "envcheck.prom"
    old = os.umask(0o077)
    try:
        writers = [subprocess.Popen([sys.executable, "-m", "envcheck", "metrics", "--textfile", str(folder)], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(6)]
    finally:
        os.umask(old)
    seen = 0
    while any(w.poll() is None for w in writers):
        if target.exists():
            text = target.read_text()
            assert text.endswith('envcheck_build_info{version="0.1.0"} 1.0\n') and text.startswith("# HELP"), text[-200:]
            seen += 1
        assert all(not name.endswith(".prom") or name == "envcheck.prom" for name in os.listdir(folder))
    assert [w.wait() for w in writers] == [0] * 6
    assert [w.stdout.read() for w in writers] == [b""] * 6
    assert os.listdir(folder) == ["envcheck.prom"]  # no temporary file left
    assert target.stat().st_mode & 0o777 == 0o644  # node_exporter's user reads it, whatever the umask
    assert 'envcheck_env_ready{env="good",framework="tensorflow",variant="",verdict="ready"} 1.0' in target.read_text()


def test_a_textfile_folder_that_is_not_one_exits_2(node, tmp_path):
    env, _ = node
    done = subprocess.run([sys.executable, "-m", "envcheck", "metrics", "--textfile", str(tmp_path / "nope")],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "" and "--textfile" in done.stderr
    assert not (tmp_path / "nope").exists()


def test_labels_nfd_file_written_atomically(node, tmp_path):
    env, _ = node
    target = tmp_path / "features.d" / "envcheck"
    target.parent.mkdir()
    done = subprocess.run([sys.executable, "-m", "envcheck", "labels", "--format", "nfd", "-o", str(target)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    lines = target.read_text().splitlines()
    assert lines == ["envcheck.io/env.good=ready", "envcheck.io/env.meh=degraded", "envcheck.io/env.moved=not-ready",
                     "envcheck.io/env.never=not-ready", "envcheck.io/ready-envs=2", "envcheck.io/gpu-health=ok"]
    assert os.listdir(target.parent) == ["envcheck"]
    as_json = subprocess.run([sys.executable, "-m", "envcheck", "labels", "--format", "json"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert json.loads(as_json.stdout)["labels"]["envcheck.io/ready-envs"] == "2"


READS = """
import atexit, sys
from envcheck.paths import Home
from envcheck.usecases.readiness import read_now
before = atexit._ncallbacks()
for _ in range(20):
    found, health = read_now(Home(sys.argv[1]))
print(len(health.gpus), health.watching, atexit._ncallbacks() - before)
"""


def test_a_scrape_leaves_no_nvml_session_open_behind_it(node):
    """The exporter reads level 1 at every scrape; a command's session keeps its read watching
    until exit, a scrape's must not (one open NVML session and exit handler per scrape)."""
    env, home = node
    done = subprocess.run([sys.executable, "-c", READS, str(home)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["2", "False", "0"], done.stderr
