"""Shutdown under a load balancer (issue #40): on SIGTERM readiness answers "not ready" (400,
as Triton's) at once while
liveness stays 200; the server goes on accepting connections and serving inference (each HTTP
answer then says `Connection: close`, so a balancer does not reuse the connection as it
closes) until no inference request arrived for --drain-quiet-ms; then it exits 0. A request
that arrives during the drain postpones the end.

No assertion is on wall-clock time: the drain's length is only bounded from above."""
import json
import signal
import socket
import time

from e2e_util import SockReader, get, wait_for

BODY = {"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}


def infer_once(port):
    """An inference on a new connection: (status, headers)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    body = json.dumps(BODY).encode()
    s.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Type: "
              b"application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
              + body)
    r = SockReader(s).read_response()
    s.close()
    return r


def test_drain_serves_until_quiet(server_factory, repos):
    srv = server_factory([repos["repo_small"]], ["--drain-quiet-ms=3000"], name="drain")
    assert infer_once(srv.port).status == 200
    srv.proc.send_signal(signal.SIGTERM)
    # not ready at once: Triton's answer for that is 400
    wait_for(lambda: get(srv.port, "/v2/health/ready").status == 400, 10, "not ready")
    assert get(srv.port, "/v2/health/live").status == 200
    # still served, on a new connection, with Connection: close
    for _ in range(3):
        r = infer_once(srv.port)
        assert r.status == 200 and (r.header("Connection") or "").lower() == "close", r.headers
        time.sleep(0.5)  # each postpones the end: the server is still there for the next
    assert srv.alive()
    assert srv.wait_exit(30) == 0, srv.describe()
    assert "Timeout 30: Found 0 in-flight inference requests" in srv.log
