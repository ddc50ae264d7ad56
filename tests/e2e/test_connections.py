"""A crowd of connections and slow clients (issue #22): the HTTP frontend holds thousands of
open connections on a bounded number of threads, refuses past --http-max-connections with a 503
and one log line per burst, closes idle and slow connections after their timeouts, counts request
bodies against --http-body-memory-limit, and exits cleanly when clients vanish mid-request.

Everything here is loopback and short; no test asserts on wall-clock time (deadlines below only
bound how long a test waits for something that must happen)."""
import json
import re
import resource
import socket
import time

import pytest

from e2e_util import SockReader, compact, get, infer_json, post, wait_for

IDENT = "/v2/models/identity_fp32/infer"
BODY = compact({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                            "data": [float(i) for i in range(16)]}]}).encode()


def infer_head(n, extra=""):
    return (f"POST {IDENT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {n}\r\n{extra}\r\n").encode()


def threads_of(srv):
    with open(f"/proc/{srv.proc.pid}/status") as f:
        return int(next(ln for ln in f if ln.startswith("Threads:")).split()[1])


def fds_of(srv):
    import os
    return len(os.listdir(f"/proc/{srv.proc.pid}/fd"))


def closed_by_peer(sock, within):
    """True when the peer closes `sock` (EOF or reset) within `within` seconds."""
    sock.settimeout(within)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def server_side_conns(port):
    """The server's open sockets on `port` that the kernel still holds (ESTABLISHED or
    CLOSE_WAIT, i.e. accepted and not yet closed by the server), from /proc/net/tcp*."""
    n = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for ln in f:
                    local, state = ln.split()[1], ln.split()[3]
                    if int(local.rsplit(":", 1)[1], 16) == port and state in ("01", "08"):
                        n += 1
        except FileNotFoundError:
            pass
    return n


def ok_infer(port):
    r = infer_json(port, "identity_fp32", json.loads(BODY))
    assert r.status == 200, r
    assert r.json()["outputs"][0]["data"] == [float(i) for i in range(16)]


def test_ten_thousand_connections(server_factory, repos):
    """10,000 keep-alive connections held open (a tenth of them after a request each): a new
    client is still served, and the server's threads do not grow with the connections."""
    want = 10_000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < want + 512:
        pytest.skip(f"the fd limit ({hard}) cannot hold {want} client sockets")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    srv = server_factory([repos["repo_small"]], ["--http-thread-count=4"])
    ok_infer(srv.port)
    threads0 = threads_of(srv)
    socks = []
    try:
        for i in range(want):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            socks.append(s)
            if i % 10 == 0:
                s.sendall(infer_head(len(BODY)) + BODY)
        for s in socks[::10]:
            r = SockReader(s).read_response()
            assert r.status == 200, r
        ok_infer(srv.port)
        assert get(srv.port, "/v2/health/ready").status == 200
        assert threads_of(srv) <= threads0 + 2, (threads0, threads_of(srv))
        assert fds_of(srv) >= want  # they really are all open
    finally:
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    wait_for(lambda: fds_of(srv) < 200, 30, "the server closing the crowd's fds")


def test_limit_refuses_with_503_and_logs_once(server_factory, repos):
    limit = 40
    srv = server_factory([repos["repo_small"]], [f"--http-max-connections={limit}"])
    # the start-up probe's connection counts until the server has seen it close (up to the
    # 1 s sweep when libmicrohttpd misses the FIN): start from no open connection at all
    wait_for(lambda: server_side_conns(srv.port) == 0, 10, "the start-up probe's connection closing")
    held = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(limit)]
    # a request answered on each held connection: all of them are accepted and counted
    # (libmicrohttpd's workers accept in their own time, in no fixed order)
    for s in held:
        s.sendall(infer_head(len(BODY)) + BODY)
        r = SockReader(s).read_response()
        assert r.status == 200, (r, server_side_conns(srv.port), srv.log_tail())
    refused = []
    for _ in range(15):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        try:
            s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
        except ConnectionResetError:
            pass
        s.close()
        refused.append(data)
    answered = [d for d in refused if d]
    assert answered, "no refused connection got an answer"
    for d in answered:
        head, _, body = d.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 "), d
        assert json.loads(body) == {
            "error": "the server has too many open connections; try again later"}
    log = srv.log
    assert log.count("refusing new connections") == 1, log
    assert f"W" in [ln[0] for ln in log.splitlines() if "refusing new connections" in ln]
    for s in held[: limit // 2]:
        s.close()
    wait_for(lambda: get(srv.port, "/v2/health/live").status == 200, 10, "a new client served")
    ok_infer(srv.port)
    # the 15 above, and any probe of wait_for's that came before the server saw the closes
    m = re.search(r"accepting connections again \((\d+) refused at the limit of 40\)", srv.log)
    assert m and int(m.group(1)) >= 15, srv.log_tail()
    for s in held[limit // 2:]:
        s.close()


def test_idle_connection_closed(server_factory, repos):
    srv = server_factory([repos["repo_small"]], ["--http-idle-timeout-secs=1"])
    fresh = socket.create_connection(("127.0.0.1", srv.port))
    used = socket.create_connection(("127.0.0.1", srv.port))
    used.sendall(infer_head(len(BODY)) + BODY)
    assert SockReader(used).read_response().status == 200
    assert closed_by_peer(fresh, 20)
    assert closed_by_peer(used, 20)
    ok_infer(srv.port)


def test_stalled_upload_closed_and_its_memory_returned(server_factory, repos):
    """A body that stops arriving is closed by the idle timeout, and the bytes it held count
    against the body memory no longer."""
    srv = server_factory([repos["repo_small"]],
                         ["--http-idle-timeout-secs=1", "--http-body-memory-limit=1000000"])
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(infer_head(2_000_000) + b" " * 900_000)
    assert closed_by_peer(s, 20)
    # 900 KB of a 1 MB budget were held; a 500 KB body fits again once they are released
    body = compact({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                "data": [0.0] * 16}]}).encode()
    padded = body[:-1] + b" " * 500_000 + body[-1:]
    wait_for(lambda: post(srv.port, IDENT, padded,
                          {"Content-Type": "application/json"}).status == 200, 10,
             "the stalled body's memory released")


def test_trickling_client_closed_by_request_timeout(server_factory, repos):
    """One byte at a time keeps a connection busy but not idle: the request deadline closes it,
    and other clients are served meanwhile."""
    srv = server_factory([repos["repo_small"]],
                         ["--http-request-timeout-secs=1", "--http-idle-timeout-secs=30"])
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(infer_head(len(BODY)))
    closed = False
    deadline = time.monotonic() + 20
    for b in BODY:
        if time.monotonic() > deadline:
            break
        try:
            s.sendall(bytes([b]))
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        ok_infer(srv.port)
        time.sleep(0.2)
    if not closed:
        closed = closed_by_peer(s, 5)
    assert closed, "a client trickling its body was never closed"
    s.close()
    ok_infer(srv.port)


def thread_names(srv):
    import os
    names = []
    for t in os.listdir(f"/proc/{srv.proc.pid}/task"):
        with open(f"/proc/{srv.proc.pid}/task/{t}/comm") as f:
            names.append(f.read().strip())
    return names


def named_threads(srv, want):
    """The server's thread names once `want` {name: count} holds (a thread names itself after
    it starts, so a count may lag the server's readiness briefly), or after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        names = thread_names(srv)
        if all(names.count(n) == k for n, k in want.items()) or time.monotonic() > deadline:
            return names
        time.sleep(0.02)


def test_http_workers_one_per_cpu_by_default(server_factory, repos):
    """--http-thread-count defaults to the CPUs the server may run on, at most Triton's 8; the
    pool for large requests has one thread per CPU; the flag sets the workers."""
    import os
    cpus = len(os.sched_getaffinity(0))  # the server inherits this process's affinity
    want = {"MHD-worker": min(cpus, 8), "http-bulk": min(cpus, 64)}
    names = named_threads(server_factory([repos["repo_small"]]), want)
    assert names.count("MHD-worker") == min(cpus, 8), names
    assert names.count("http-bulk") == min(cpus, 64), names
    srv = server_factory([repos["repo_small"]], ["--http-thread-count=3"])
    names = named_threads(srv, {"MHD-worker": 3})
    assert names.count("MHD-worker") == 3, names


def answered_after_small_ones(port, request):
    """Sends `request` (head and body) but its last byte, then one 16-float request on another
    connection; once that is answered (the worker has read everything sent so far), the last
    byte, and three 16-float requests one after another: each must be answered before the first
    byte of the large one's reply. Returns that reply, read in full."""
    import select
    large = socket.create_connection(("127.0.0.1", port))
    large.sendall(request[:-1])
    small = socket.create_connection(("127.0.0.1", port))
    reader = SockReader(small)
    small.sendall(infer_head(len(BODY)) + BODY)
    assert reader.read_response().status == 200
    large.sendall(request[-1:])  # the large request is complete: its answer takes a while
    time.sleep(0.05)  # let the worker pick it up (the assertion does not depend on how long)
    for _ in range(3):
        small.sendall(infer_head(len(BODY)) + BODY)
        r = reader.read_response()
        assert r.status == 200 and json.loads(r.body)["outputs"][0]["data"][15] == 15.0
        assert not select.select([large], [], [], 0)[0], "the large one was answered first"
    large.settimeout(120)
    r = SockReader(large).read_response()
    large.close()
    small.close()
    assert r.status == 200, r.body[:300]
    return r


def test_large_json_request_does_not_hold_the_worker(server_factory, repos):
    """With one HTTP worker, a 32 MB JSON request (8M floats) is parsed, run and answered on the
    pool of http_bulk.c, not on the worker: 16-float requests sent on another connection while it
    is in flight are answered before its first reply byte. (When the worker parsed it itself they
    waited for all of it: the worker only read them once its reply was written.)"""
    srv = server_factory([repos["repo_small"]], ["--http-thread-count=1"])
    n = 8_000_000
    body = ('{"inputs":[{"name":"INPUT0","shape":[1,%d],"datatype":"FP32","data":[%s]}]}'
            % (n, ",".join(["1.5"] * n))).encode()
    r = answered_after_small_ones(srv.port, infer_head(len(body)) + body)
    out = json.loads(r.body)["outputs"][0]
    assert out["shape"] == [1, n] and out["data"][0] == 1.5 and out["data"][-1] == 1.5
    ok_infer(srv.port)


@pytest.mark.parametrize("reply", ["json", "gzip"])
def test_large_reply_to_a_small_request_does_not_hold_the_worker(server_factory, repos, reply):
    """With one HTTP worker, a request whose JSON part is small but whose reply is large (8M
    floats sent back as JSON text, or as a binary output the client asks to have gzipped) has its
    reply built on the pool of http_bulk.c: 16-float requests sent on another connection while it
    is encoded are answered before its first reply byte. (When the worker encoded it itself they
    waited for all of it.)"""
    import gzip
    import struct
    srv = server_factory([repos["repo_small"]], ["--http-thread-count=1"])
    n = 8_000_000
    params = {"binary_data": True} if reply == "gzip" else {}
    header = compact({"inputs": [{"name": "INPUT0", "shape": [1, n], "datatype": "FP32",
                                  "parameters": {"binary_data_size": 4 * n}}],
                      "outputs": [{"name": "OUTPUT0", "parameters": params}]}).encode()
    body = header + struct.pack("<f", 1.5) * n
    extra = f"Inference-Header-Content-Length: {len(header)}\r\n"
    if reply == "gzip":
        extra += "Accept-Encoding: gzip\r\n"
    r = answered_after_small_ones(srv.port, infer_head(len(body), extra) + body)
    if reply == "gzip":
        assert r.header("Content-Encoding") == "gzip"
        data = gzip.decompress(r.body)
        hlen = int(r.header("Inference-Header-Content-Length"))
        assert data[hlen:] == struct.pack("<f", 1.5) * n
    else:
        out = json.loads(r.body)["outputs"][0]
        assert out["shape"] == [1, n] and out["data"][0] == 1.5 and out["data"][-1] == 1.5
    ok_infer(srv.port)


def test_body_memory_limit_answers_503(server_factory, repos):
    srv = server_factory([repos["repo_small"]], ["--http-body-memory-limit=1000000"])
    holder = socket.create_connection(("127.0.0.1", srv.port))
    holder.sendall(infer_head(1_000_000) + b" " * 800_000)
    time.sleep(0.3)  # let the server receive it (nothing depends on how long this takes)
    big = b" " * 400_000
    r = post(srv.port, IDENT, big, {"Content-Type": "application/json"})
    assert r.status == 503, r
    assert r.json() == {"error": "the server's memory for request bodies (1000000 bytes, "
                                 "--http-body-memory-limit) is in use; try again later"}
    ok_infer(srv.port)  # small bodies still fit
    holder.close()
    wait_for(lambda: post(srv.port, IDENT, big, {"Content-Type": "application/json"}).status
             == 400, 10, "the held body's memory released")


def test_clients_vanishing_mid_request_then_sigterm(server_factory, repos):
    """Requests in flight whose clients close (with a reset) are finished and dropped; the
    server keeps serving, and SIGTERM still stops it with code 0."""
    srv = server_factory([repos["repo_small"]], [])
    for _ in range(300):
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(infer_head(len(BODY)) + BODY)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
        s.close()
    ok_infer(srv.port)
    assert srv.stop() == 0


def test_library_quirks_leave_the_server_serving(server_factory, repos):
    """libmicrohttpd 0.9.75 answers a malformed Content-Length itself (and writes its status
    line twice) and waits on `Transfer-Encoding: gzip, chunked` (docs/reliability.md); neither
    may cost other clients anything."""
    srv = server_factory([repos["repo_small"]], ["--http-idle-timeout-secs=1"])
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"POST " + IDENT.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
    assert s.recv(65536).startswith(b"HTTP/1.1 400 ")
    s.close()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"POST " + IDENT.encode() + b" HTTP/1.1\r\nHost: x\r\n"
              b"Transfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
    ok_infer(srv.port)
    assert closed_by_peer(s, 20)  # the idle timeout ends it
    ok_infer(srv.port)


def test_clients_closing_mid_request_do_not_hold_fds(server_factory, repos):
    """A client that sends a partial header or part of a body and closes in the same breath
    (the FIN arriving with the bytes) frees its connection long before the idle timeout;
    one that half-closes after a whole request still gets its answer."""
    srv = server_factory([repos["repo_small"]], [])  # idle timeout: the default, 300 s
    ok_infer(srv.port)
    base = fds_of(srv)
    for i in range(200):
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(infer_head(len(BODY)) + BODY[: len(BODY) // 2] if i % 2
                  else b"POST " + IDENT.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Len")
        s.close()
    wait_for(lambda: fds_of(srv) <= base + 2, 20, "the server closing 200 abandoned connections")
    for _ in range(50):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(infer_head(len(BODY)) + BODY)
        s.shutdown(socket.SHUT_WR)
        r = SockReader(s).read_response()
        assert r.status == 200, r
        s.close()
    ok_infer(srv.port)
