"""Replicas behind HAProxy (issue #40): requests/s and CPU per request of one nereid reached
directly, one behind HAProxy, and three behind HAProxy (deploy/haproxy/haproxy.cfg as shipped),
for a tiny JSON inference (`simple`) driven by wrk. Interleaved rounds, medians.

On this 2-core machine three replicas cannot scale: they, HAProxy and wrk share the same two
cores, so the figure is what the balancer and the extra processes cost, not a speed-up; on a
machine with a core per replica the replicas' own CPU per request is what stays the same.

    .venv/bin/python bench/replicas.py            # BENCH_ROUNDS (5), BENCH_SECONDS (4), BENCH_CONNS (16)
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (REPO, ROOT, cpu_seconds, start_server, stop_server, wait_live,  # noqa: E402
                      write_lua, wrk)

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "4"))
CONNS = int(os.environ.get("BENCH_CONNS", "16"))
BODY = (b'{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":'
        b'[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"INPUT1","shape":[1,16],'
        b'"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}')


def haproxy(http_port, replicas, base):
    """HAProxy with the shipped config; its three server lines point at `replicas` in turn."""
    env = dict(os.environ, HAPROXY_HTTP=f"127.0.0.1:{http_port}",
               HAPROXY_GRPC=f"127.0.0.1:{http_port + 1}")
    for i in range(3):
        h = replicas[i % len(replicas)]
        env.update({f"NEREID_{i + 1}_HTTP": f"127.0.0.1:{h}",
                    f"NEREID_{i + 1}_GRPC": f"127.0.0.1:{h + 10}",
                    f"NEREID_{i + 1}_HTTP_PORT": str(h)})
    p = subprocess.Popen(["haproxy", "-db", "-f", os.path.join(ROOT, "deploy/haproxy/haproxy.cfg")],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)  # two checks: every server in rotation
    wait_live(http_port, p, 30, "/v2/health/ready")
    return p


def main():
    tmp = tempfile.mkdtemp(prefix="nereid-bench-replicas-")
    lua = os.path.join(tmp, "simple.lua")
    write_lua(lua, {"Content-Type": "application/json"}, body=BODY)
    ports = [19101, 19102, 19103]  # gRPC on +10, metrics on +20
    servers = [start_server(REPO, p, f"--grpc-port={p + 10}", f"--metrics-port={p + 20}",
                            "--grpc-address=127.0.0.1") for p in ports]
    lb1 = haproxy(19400, ports[:1], tmp)
    lb3 = haproxy(19500, ports, tmp)
    setups = {
        "1 replica, direct": (ports[0], [servers[0]], None),
        "1 replica, HAProxy": (19400, [servers[0]], lb1),
        "3 replicas, HAProxy": (19500, servers, lb3),
    }
    rows = {name: [] for name in setups}
    path = "/v2/models/simple/infer"
    try:
        for name, (port, _, _) in setups.items():  # warm every path once
            wrk(port, path, lua, CONNS, 1)
        for _ in range(ROUNDS):
            for name, (port, procs, lb) in setups.items():
                pids = [s.pid for s in servers] + ([lb.pid] if lb else [])
                c0 = {pid: cpu_seconds(pid) for pid in pids}
                rps, p50, p99 = wrk(port, path, lua, CONNS, SECONDS)
                used = {pid: cpu_seconds(pid) - c0[pid] for pid in pids}
                n = rps * SECONDS
                server_us = sum(used[s.pid] for s in servers) / n * 1e6
                lb_us = used[lb.pid] / n * 1e6 if lb else 0.0
                rows[name].append((rps, p50, p99, server_us, lb_us))
    finally:
        for p in (lb1, lb3):
            p.terminate()
            p.wait()
        for s in servers:
            stop_server(s)
    print(f"simple (JSON), wrk c={CONNS}, {ROUNDS} rounds of {SECONDS} s, medians; "
          f"{os.cpu_count()} cores shared by everything")
    print(f"{'setup':<22} {'req/s':>9} {'p50 us':>8} {'p99 us':>8} {'nereid CPU us/req':>18} "
          f"{'HAProxy CPU us/req':>19}")
    for name, rs in rows.items():
        med = [statistics.median(col) for col in zip(*rs)]
        print(f"{name:<22} {med[0]:>9.0f} {med[1]:>8.0f} {med[2]:>8.0f} {med[3]:>18.1f} "
              f"{med[4]:>19.1f}")


if __name__ == "__main__":
    main()
