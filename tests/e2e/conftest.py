"""Fixtures for the end-to-end suite: test model repositories and real nereid servers.

The server binary is build/bin/nereid, or $NEREID_BIN. Each server runs on a free port bound to
127.0.0.1, writes its console (stdout and stderr) to a log file, and is stopped with SIGTERM at
teardown, where its exit code is checked (0 unless the test says otherwise).

    NEREID_BIN=build/bin/nereid .venv/bin/python -m pytest -q tests/e2e
"""

import http.client
import os
import random
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import pytest

import e2e_util
import models

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60     # until /v2/health/live answers
STOP_TIMEOUT_S = 60      # after SIGTERM/SIGINT


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "load_threads: exercises nereid-perf's own load threads; `make tsan` runs "
        "these of the timing-bound files under ThreadSanitizer too")


def nereid_bin():
    return Path(os.environ.get("NEREID_BIN") or ROOT / "build" / "bin" / "nereid")


def require_binary():
    path = nereid_bin()
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(f"nereid binary not found or not executable: {path}\n"
                    "Build it with `make` (build/bin/nereid) or point NEREID_BIN at it.",
                    pytrace=False)
    return path


_given_ports = set()


def free_port():
    """A port of 127.0.0.1 nothing listens on, below the kernel's ephemeral range (so no client's
    outgoing connection takes it before the server binds it) and not handed out before in this
    session. The bind test leaves a small window; NereidServer retries on "already in use"."""
    lo, _ = (int(x) for x in open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(20000, max(20001, min(lo, 32768)))
        if port in _given_ports:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given_ports.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@lru_cache(maxsize=1)
def help_text():
    """`nereid --help` output (both streams), used to learn which optional flags exist."""
    try:
        p = subprocess.run([str(require_binary()), "--help"], capture_output=True, timeout=30)
    except subprocess.TimeoutExpired:
        return ""
    return (p.stdout + p.stderr).decode("utf-8", "replace")


def side_port_flags():
    """The gRPC and metrics port flags this build serves (its --help lists the flag without
    calling it "not implemented"), so that servers started side by side never fight over
    8001/8002."""
    lines = help_text().splitlines()
    out = []
    for flag in ("--grpc-port", "--metrics-port"):
        for i, line in enumerate(lines):
            if flag in line:
                around = " ".join(lines[i:i + 2])
                if "not implemented" not in around:
                    out.append(flag)
                break
    return out


def run_cli(args, timeout=30):
    """Runs nereid to completion (for flags that make it exit). Returns CompletedProcess."""
    return subprocess.run([str(require_binary())] + list(args), capture_output=True,
                          timeout=timeout, cwd=ROOT)


FALSE_WORDS = ("false", "off", "0", "False", "FALSE", "OFF")  # what nereid reads as false


def listening(port):
    """True when 127.0.0.1:port accepts a TCP connection."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


class NereidServer:
    """A running nereid. `url` is what tritonclient wants ("127.0.0.1:<port>")."""

    def __init__(self, repos, args, log_path, port=None, extra_ports=True):
        self.binary = require_binary()
        self.host = "127.0.0.1"
        self.log_path = Path(log_path)
        self._repos, self._args, self._fixed_port = list(repos), list(args), port
        self._extra_ports = extra_ports
        self._retries = 0
        self._pick_ports()
        self.proc = None
        self.returncode = None

    def _pick_ports(self):
        """HTTP, gRPC and metrics on free ports of 127.0.0.1 (gRPC and metrics None where this
        build does not serve them or extra_ports is off)."""
        self.port = self._fixed_port or free_port()
        self.url = f"{self.host}:{self.port}"
        self.argv = [str(self.binary)]
        self.argv += [f"--model-repository={r}" for r in self._repos]
        self.argv += [f"--http-port={self.port}", f"--http-address={self.host}"]
        # no load balancer sends to a test's server after SIGTERM: it exits once idle instead
        # of serving on for a second (a test that wants the drain gives its own value later)
        self.argv += ["--drain-quiet-ms=0"]
        self.grpc_port = self.metrics_port = None
        if self._extra_ports:
            for flag in side_port_flags():
                port = free_port()
                if flag == "--grpc-port":
                    self.grpc_port = port
                    self.argv += [f"--grpc-port={port}", f"--grpc-address={self.host}"]
                else:
                    self.metrics_port = port
                    self.argv += [f"--metrics-port={port}"]
        self.argv += self._args

    @property
    def grpc_url(self):
        """What tritonclient.grpc wants ("127.0.0.1:<grpc port>")."""
        return f"{self.host}:{self.grpc_port}"

    def start(self):
        self._logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self._logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=ROOT)
        return self

    @property
    def log(self):
        """Everything the server printed so far (stdout and stderr merged)."""
        try:
            return self.log_path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines=120):
        return "\n".join(self.log.splitlines()[-lines:])

    def describe(self):
        return f"$ {' '.join(self.argv)}\n--- server console (last lines) ---\n{self.log_tail()}"

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def _bound_http(self):
        """Whether this server says it serves HTTP on its port (and not another server that
        took the port first answered the health check)."""
        return any("Started HTTPService at" in line and line.rstrip().endswith(f":{self.port}")
                   for line in self.log.splitlines())

    def wait_live(self, timeout=START_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None and "already in use" in self.log and self._retries < 3 \
                    and self._fixed_port is None:
                # a port picked as free was taken before the server bound it: new ports
                self._retries += 1
                self._logf.close()
                self._pick_ports()
                self.start()
                continue
            if rc is not None:
                self.returncode = rc
                pytest.fail(f"nereid exited with code {rc} before /v2/health/live answered\n"
                            + self.describe(), pytrace=False)
            try:
                if e2e_util.get(self.port, "/v2/health/live").status == 200 \
                        and all(map(listening, self._side_ports())) and self._bound_http():
                    return self
            except (OSError, http.client.HTTPException):
                # (a port picked as free may be another server's meanwhile: its gRPC port
                # answers HTTP/2 frames; this server then exits "already in use", above)
                pass
            time.sleep(0.05)
        self.kill()
        pytest.fail(f"nereid did not answer /v2/health/live (and listen on its gRPC and metrics "
                    f"ports) within {timeout} s\n" + self.describe(), pytrace=False)

    def _side_ports(self):
        """The gRPC and metrics ports this server serves: HTTP answers live before the metrics
        service is up (Triton's start order: gRPC, HTTP, metrics), so a test's first scrape
        waits for its port too. A frontend turned off by an --allow-...=false argument has none."""
        off = {a.split("=", 1)[0] for a in self._args
               if a.startswith("--allow-") and a.split("=", 1)[-1] in FALSE_WORDS}
        return [port for port, flag in ((self.grpc_port, "--allow-grpc"),
                                        (self.metrics_port, "--allow-metrics"))
                if port is not None and flag not in off]

    def wait_exit(self, timeout=STOP_TIMEOUT_S):
        """Waits for the process to end by itself; returns its exit code (None on timeout)."""
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._logf.close()
        return self.returncode

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT_S):
        """Sends `sig` and waits; returns the exit code. Kills and fails after `timeout`."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            rc = self.wait_exit(timeout)
            if rc is None:
                self.kill()
                pytest.fail(f"nereid still running {timeout} s after signal {sig}\n"
                            + self.describe(), pytrace=False)
        self.returncode = self.proc.wait()
        self._logf.close()
        return self.returncode

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self._logf.closed:
            self._logf.close()


@contextmanager
def running_server(repos, args=(), *, log_dir, name="nereid", expect_rc=0, wait=True):
    """Starts nereid, waits until it is live, yields it; at exit stops it with SIGTERM (unless the
    test already stopped it) and checks the exit code against `expect_rc` (None: not checked)."""
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    srv = NereidServer(repos, args, log_dir / f"{name}.log")
    srv.start()
    try:
        if wait:
            srv.wait_live()
        yield srv
    except BaseException:
        srv.kill()
        raise
    rc = srv.stop() if srv.returncode is None else srv.returncode
    if expect_rc is not None and rc != expect_rc:
        pytest.fail(f"nereid exited with code {rc}, expected {expect_rc}\n" + srv.describe(),
                    pytrace=False)


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def repos(tmp_path_factory):
    """{repository name: Path} for every repository in models.REPOS, built once per session."""
    return models.build_all(tmp_path_factory.mktemp("repos"))


@pytest.fixture(scope="module")
def main_server(repos, tmp_path_factory):
    """The full test repository (plus the per-datatype models in a second --model-repository),
    with --exit-on-error=false because `broken` fails to load. One per test module."""
    log_dir = tmp_path_factory.mktemp("main_server")
    with running_server([repos["repo"], repos["repo_dtypes"]], ["--exit-on-error=false"],
                        log_dir=log_dir, name="main") as srv:
        yield srv


@pytest.fixture(scope="module")
def small_server(repos, tmp_path_factory):
    """Only good models (simple, identity_fp32, identity_bytes, order_test), default flags."""
    log_dir = tmp_path_factory.mktemp("small_server")
    with running_server([repos["repo_small"]], [], log_dir=log_dir, name="small") as srv:
        yield srv


@pytest.fixture
def server_factory(tmp_path):
    """start(repos, args, expect_rc=0, wait=True, name=...) -> NereidServer; every server it
    started is stopped at teardown and its exit code checked."""
    stack = []

    def start(repo_paths, args=(), *, expect_rc=0, wait=True, name=None):
        cm = running_server(repo_paths, args, log_dir=tmp_path,
                            name=name or f"srv{len(stack)}", expect_rc=expect_rc, wait=wait)
        srv = cm.__enter__()
        stack.append(cm)
        return srv

    yield start
    errors = []
    for cm in reversed(stack):
        try:
            cm.__exit__(None, None, None)
        except BaseException as e:  # keep stopping the others
            errors.append(e)
    if errors:
        raise errors[0]
