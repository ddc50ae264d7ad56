#!/usr/bin/env python3
"""Whether one large JSON request, or one large reply, stalls the other clients of its HTTP worker.

The server runs with `--http-thread-count=1` (every connection on one worker). One client posts
identity_fp32 a large request of N floats (8M: 32 MB) while another sends 16-float JSON requests
back to back from the moment the large one was all sent, until the large one's reply is in.
Prints how many small requests were answered before the large one's first reply byte and the
longest a small one waited (docs/architecture.md, "HTTP connections"). KIND says what is large:
  request  the request's JSON (and its JSON reply)
  reply    only the reply: the input is a binary tensor, the output comes back as JSON
  gzip     only the reply's encoding: binary in, binary out, the client accepts gzip

    .venv/bin/python bench/stall.py [N] [RUNS] [KIND]    # N = 8000000, RUNS = 2, KIND = request
"""
import json, socket, struct, sys, threading, time

from benchlib import REPO, start_server, stop_server

PORT = 18597
IDENT = "/v2/models/identity_fp32/infer"


def request(body, extra=""):
    return (f"POST {IDENT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def large_request(n, kind):
    if kind == "request":
        return request(('{"inputs":[{"name":"INPUT0","shape":[1,%d],"datatype":"FP32","data":[%s]}]}'
                        % (n, ",".join(["1.5"] * n))).encode())
    params = {"binary_data": True} if kind == "gzip" else {}
    header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, n], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 4 * n}}],
                         "outputs": [{"name": "OUTPUT0", "parameters": params}]}).encode()
    extra = f"Inference-Header-Content-Length: {len(header)}\r\n"
    if kind == "gzip":
        extra += "Accept-Encoding: gzip\r\n"
    return request(header + struct.pack("<f", 1.5) * n, extra)


def read_response(sock, buf=b""):
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    head, rest = buf.split(b"\r\n\r\n", 1)
    n = int(next(ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length"))
            .split(b":")[1])
    parts, have = [rest], len(rest)
    while have < n:
        chunk = sock.recv(1 << 20)
        parts.append(chunk)
        have += len(chunk)
    return head.split(b"\r\n")[0]


def run(n, kind):
    large = large_request(n, kind)
    small = request(json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                            "data": [1.0] * 16}]}).encode())
    ss = socket.create_connection(("127.0.0.1", PORT))
    ss.sendall(small)
    read_response(ss)
    ls = socket.create_connection(("127.0.0.1", PORT))
    t = {}

    def large_client():
        ls.sendall(large)
        t["sent"] = time.time()
        first = ls.recv(1)
        t["first"] = time.time()
        read_response(ls, first)
        t["done"] = time.time()

    th = threading.Thread(target=large_client)
    th.start()
    while "sent" not in t:
        time.sleep(0.0005)
    before = k = 0
    worst = 0.0
    while "done" not in t:
        t0 = time.time()
        ss.sendall(small)
        status = read_response(ss)
        dt = time.time() - t0
        if b" 200 " not in status:
            sys.exit(f"small request answered {status!r}")
        worst, k = max(worst, dt), k + 1
        if "first" not in t or t0 + dt < t["first"]:
            before += 1
    th.join()
    ss.close()
    ls.close()
    print(f"{kind}: large {len(large) / 1e6:.1f} MB: first reply byte {1000 * (t['first'] - t['sent']):.0f} ms "
          f"after it was sent, reply in at {1000 * (t['done'] - t['sent']):.0f} ms; small requests "
          f"answered before its first byte: {before} of {k}; longest small wait {1000 * worst:.1f} ms")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8_000_000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    kind = sys.argv[3] if len(sys.argv) > 3 else "request"
    if kind not in ("request", "reply", "gzip"):
        sys.exit(f"KIND is request, reply or gzip, not {kind}")
    srv = start_server(REPO, PORT, "--http-thread-count=1", "--grpc-port=0", "--metrics-port=0")
    try:
        for _ in range(runs):
            run(n, kind)
    finally:
        stop_server(srv)


if __name__ == "__main__":
    main()
