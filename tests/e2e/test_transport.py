"""HTTP/1.1 transport details clients rely on: keep-alive, pipelining (nereid answers every
pipelined request in order, a README departure from Triton), Expect: 100-continue, chunked
request bodies, HTTP/1.0."""

import socket

from e2e_util import SockReader, assert_matches_recorded, read_http_response, recorded

SIMPLE_BODY = recorded("simple JSON in/out (INT32 [1,16])")["request"]["body"].encode()
SIMPLE_ANSWER = recorded("simple JSON in/out (INT32 [1,16])")["body"].encode()


def _connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=20)


def _infer_head(length, extra=""):
    return (f"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n{extra}\r\n").encode()


def test_keep_alive_sequential(main_server):
    s = _connect(main_server.port)
    reader = SockReader(s)
    try:
        for i in range(3):
            s.sendall(_infer_head(len(SIMPLE_BODY)) + SIMPLE_BODY)
            r = reader.read_response()
            assert r.status == 200 and r.body == SIMPLE_ANSWER, (i, r)
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        r = reader.read_response()
        assert reader.buf == b"", reader.buf
        assert r.status == 200 and r.body == b""
        assert s.recv(1) == b""  # closed after Connection: close
    finally:
        s.close()


def test_pipelined_requests_all_answered_in_order(main_server):
    s = _connect(main_server.port)
    try:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
                  + _infer_head(len(SIMPLE_BODY)) + SIMPLE_BODY
                  + b"GET /v2/models/nosuchmodel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        reader = SockReader(s)
        r1, r2, r3 = (reader.read_response() for _ in range(3))
    finally:
        s.close()
    assert r1.status == 200 and r1.body == b""
    assert r2.status == 200 and r2.body == SIMPLE_ANSWER
    assert r3.status == 404 and r3.body == \
        b'{"error":"Request for unknown model: \'nosuchmodel\' is not found"}'


def test_expect_100_continue(main_server):
    e = recorded("simple with Expect: 100-continue (raw socket; what arrives before the body is sent)")
    body = e["request"]["body"].encode()
    s = _connect(main_server.port)
    try:
        s.sendall(_infer_head(len(body), "Expect: 100-continue\r\n"))
        first = b""
        while b"\r\n\r\n" not in first:
            chunk = s.recv(4096)
            assert chunk, first
            first += chunk
        assert first == e["received_before_body_sent"].encode()  # "HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(body)
        r = read_http_response(s)
    finally:
        s.close()
    expected = e["raw_response_after_body"].split("\r\n\r\n", 1)[1].encode()
    assert r.status == 200 and r.body == expected


def test_chunked_request_body(main_server):
    what = "simple chunked request body (Transfer-Encoding: chunked)"
    body = recorded(what)["request"]["body"].encode()
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 50]), body[i:i + 50])
                       for i in range(0, len(body), 50)) + b"0\r\n\r\n"
    s = _connect(main_server.port)
    try:
        s.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
        r = read_http_response(s)
    finally:
        s.close()
    assert_matches_recorded(r, what)


def test_http_1_0(main_server):
    s = _connect(main_server.port)
    try:
        s.sendall(b"GET /v2/models/simple HTTP/1.0\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break  # HTTP/1.0 without keep-alive: the server closes
            data += chunk
    finally:
        s.close()
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.") and b" 200 " in head.split(b"\r\n")[0], head
    assert body == recorded("model metadata simple")["body"].encode()
