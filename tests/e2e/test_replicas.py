"""Replicas behind a real load balancer (issue #40): three nereid processes behind HAProxy
(Debian's 2.6, deploy/haproxy/haproxy.cfg as shipped: HTTP, and gRPC over h2), each checked on
/v2/health/ready. Under steady load from nereid-perf, a rolling restart of all three (SIGTERM,
wait for the exit, start again on the same ports) loses no request and returns no error, over
HTTP and over gRPC; `kill -9` of one replica fails at most the requests that were on it, and
the others keep serving.

Runs in the timed tier, alone: it loads the machine. No assertion is on wall-clock time."""
import http.client
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT, NereidServer, free_port, listening
from e2e_util import get, wait_for

CFG = ROOT / "deploy" / "haproxy" / "haproxy.cfg"
PERF = Path(os.environ.get("NEREID_BIN") or ROOT / "build" / "bin" / "nereid").parent / \
    "nereid-perf"
BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}).encode()


class Cluster:
    def __init__(self, repo, tmp_path):
        assert shutil.which("haproxy"), "haproxy (scripts/setup.sh installs it) is missing"
        self.repo, self.tmp = repo, tmp_path
        self.ports = [(free_port(), free_port(), free_port()) for _ in range(3)]
        self.gen = [0, 0, 0]
        self.servers = [self.start(i) for i in range(3)]
        self.http, self.grpc = free_port(), free_port()
        env = dict(os.environ, HAPROXY_HTTP=f"127.0.0.1:{self.http}",
                   HAPROXY_GRPC=f"127.0.0.1:{self.grpc}")
        for i, (h, g, _) in enumerate(self.ports, 1):
            env.update({f"NEREID_{i}_HTTP": f"127.0.0.1:{h}", f"NEREID_{i}_GRPC": f"127.0.0.1:{g}",
                        f"NEREID_{i}_HTTP_PORT": str(h)})
        self.haproxy = subprocess.Popen(["haproxy", "-db", "-f", str(CFG)], env=env,
                                        stdout=open(tmp_path / "haproxy.log", "wb"),
                                        stderr=subprocess.STDOUT)
        wait_for(lambda: listening(self.http) and listening(self.grpc), 30, "haproxy listening")
        self.wait_in_rotation()

    def start(self, i):
        h, g, m = self.ports[i]
        self.gen[i] += 1
        srv = NereidServer([self.repo], [f"--grpc-port={g}", "--grpc-address=127.0.0.1",
                                         f"--metrics-port={m}", "--drain-quiet-ms=1000"],
                           self.tmp / f"nereid{i}.{self.gen[i]}.log", port=h, extra_ports=False)
        return srv.start().wait_live()

    def wait_in_rotation(self):
        """Until every replica has passed HAProxy's checks (two in a row after a start)."""
        time.sleep(1.5)

    def restart(self, i):
        assert self.servers[i].stop(signal.SIGTERM) == 0, self.servers[i].describe()
        self.servers[i] = self.start(i)
        self.wait_in_rotation()

    def served(self):
        """Inference requests the replicas running now have answered."""
        n = 0
        for srv in self.servers:
            r = get(srv.port, "/v2/models/simple/stats")
            if r.status == 200:
                st = r.json()["model_stats"][0]["inference_stats"]["success"]
                n += int(st.get("count", 0))
        return n

    def close(self):
        self.haproxy.terminate()
        self.haproxy.wait(30)
        for s in self.servers:
            if s.alive():
                s.stop()


@pytest.fixture
def cluster(repos, tmp_path):
    c = Cluster(repos["repo_small"], tmp_path)
    yield c
    c.close()


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_rolling_restart_loses_nothing(cluster, proto, tmp_path):
    url = f"127.0.0.1:{cluster.http if proto == 'http' else cluster.grpc}"
    out = open(tmp_path / "perf.txt", "wb")
    # three windows of 5 s at concurrency 8; it stops at its first failed request (rc != 0)
    perf = subprocess.Popen([str(PERF), "-m", "simple", "-u", url, "-i", proto,
                             "--concurrency-range", "8", "-p", "5000", "-s", "1000", "-r", "3"],
                            stdout=out, stderr=subprocess.STDOUT)
    wait_for(lambda: cluster.served() > 1000 or perf.poll() is not None, 60,
             "nereid-perf's requests reaching the replicas")
    restarted = 0
    for i in range(3):
        if perf.poll() is not None:
            break
        cluster.restart(i)
        restarted += 1
    rc = perf.wait(120)
    text = (tmp_path / "perf.txt").read_text()
    assert rc == 0, text[-3000:]
    assert restarted >= 2, f"only {restarted} restarts happened under load"
    assert "Successful request count" in text
    for s in cluster.servers:  # the restarted replicas all serve
        assert s.alive()


def client_loop(port, stop, results):
    """One client of its own connection: (time, ok) per request until stop."""
    conn = None
    while not stop.is_set():
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("POST", "/v2/models/simple/infer", BODY,
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            results.append((time.monotonic(), r.status == 200))
            if r.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            results.append((time.monotonic(), False))
            conn = None


def test_kill_9_fails_at_most_what_was_on_it(cluster):
    stop, results, threads = threading.Event(), [], []
    for _ in range(8):
        t = threading.Thread(target=client_loop, args=(cluster.http, stop, results))
        t.start()
        threads.append(t)
    wait_for(lambda: len(results) > 200, 30, "requests flowing")
    victim = cluster.servers[0]
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait()
    killed_at = time.monotonic()
    wait_for(lambda: sum(ok for t, ok in results if t > killed_at + 1) > 200, 60,
             "the other replicas serving after the kill")
    stop.set()
    for t in threads:
        t.join(30)
    failed = [t for t, ok in results if not ok]
    assert len(failed) <= 8, f"{len(failed)} failed requests (8 clients)"
    assert all(ok for t, ok in results if t > killed_at + 1), "failures after the kill settled"
