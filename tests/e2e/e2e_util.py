"""Shared helpers for the end-to-end suite: raw HTTP, recorded Triton answers, reference results.

Raw HTTP goes through http.client with no automatic headers except `Host` (and `Content-Length`
when a body is given and the caller did not set it), like the recordings in
spec/triton-answers/http.jsonl, which tests/e2e/data/triton_http.jsonl copies unchanged.
"""

import base64
import http.client
import json
import socket
import struct
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parent / "data"


# ----------------------------------------------------------------------------- raw HTTP

class Response:
    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers          # list of (name, value) as received
        self.body = body                # bytes

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_names(self):
        return {k.lower() for k, _ in self.headers}

    @property
    def text(self):
        return self.body.decode("utf-8")

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        body = self.body if len(self.body) < 600 else self.body[:600] + b"..."
        return f"<Response {self.status} {self.reason} {self.headers} {body!r}>"


def request(port, method, path, body=None, headers=None, *, host="127.0.0.1", timeout=60,
            content_length=True):
    """One exchange on a fresh connection. `headers` is sent exactly (dict or list of pairs)."""
    if isinstance(body, str):
        body = body.encode()
    hdrs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    names = {k.lower() for k, _ in hdrs}
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if "host" not in names:
            conn.putheader("Host", f"{host}:{port}")
        for k, v in hdrs:
            conn.putheader(k, v)
        if (body is not None and content_length and "content-length" not in names
                and "transfer-encoding" not in names):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read()
        return Response(resp.status, resp.reason, resp.getheaders(), data)
    finally:
        conn.close()


def get(port, path, headers=None):
    return request(port, "GET", path, headers=headers)


def post(port, path, body=b"", headers=None):
    return request(port, "POST", path, body=body, headers=headers)


def compact(obj):
    """Compact JSON as Triton writes it (no spaces, UTF-8 kept)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def post_json(port, path, obj, headers=None):
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers or {})
    return post(port, path, compact(obj).encode(), hdrs)


def infer_json(port, model, payload, version=None, headers=None):
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
    return post_json(port, path, payload, headers)


def binary_request(json_header, chunks=()):
    """(body, headers) for a binary-extension request: compact JSON header then the chunks."""
    head = compact(json_header).encode() if not isinstance(json_header, bytes) else json_header
    body = head + b"".join(chunks)
    return body, {"Content-Type": "application/octet-stream",
                  "Inference-Header-Content-Length": str(len(head))}


def split_binary_response(resp):
    """(json_header_dict, {output name: raw bytes}) of a binary-extension response."""
    hlen = int(resp.header("Inference-Header-Content-Length"))
    header = json.loads(resp.body[:hlen])
    out, off = {}, hlen
    for o in header["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is not None:
            out[o["name"]] = resp.body[off:off + size]
            off += size
    assert off == len(resp.body), f"{len(resp.body) - off} trailing bytes after binary outputs"
    return header, out


def raw_exchange(port, data, *, read_until_close=True, timeout=10, host="127.0.0.1"):
    """Sends raw bytes on one socket, returns everything read until the peer closes (or timeout)."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(data)
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                if read_until_close:
                    raise
                break
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)
    finally:
        s.close()


class SockReader:
    """Reads consecutive HTTP/1.x responses (Content-Length framed) from one socket, keeping
    whatever arrives beyond the current response for the next one (pipelining)."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"connection closed mid-response; have {self.buf[:300]!r}")
        self.buf += chunk

    def read_response(self):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        _, status, *reason = lines[0].split(" ", 2)
        headers = [tuple(x.strip() for x in ln.split(":", 1)) for ln in lines[1:]]
        resp = Response(int(status), reason[0] if reason else "", headers, b"")
        if int(status) == 100:
            return resp
        n = int(resp.header("Content-Length", "0"))
        while len(self.buf) < n:
            self._fill()
        resp.body, self.buf = self.buf[:n], self.buf[n:]
        return resp


def read_http_response(sock):
    """Reads one HTTP/1.x response from a socket -> Response."""
    return SockReader(sock).read_response()


def post_early_answer(port, path, body, headers=None, *, content_length=None, timeout=60,
                      host="127.0.0.1"):
    """POST that tolerates the server answering (and closing) before the whole body is sent,
    as a server refusing an oversized body may do. Returns the Response."""
    hdrs = dict(headers or {})
    hdrs.setdefault("Host", f"{host}:{port}")
    hdrs.setdefault("Content-Length", str(len(body) if content_length is None else content_length))
    head = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        try:
            s.sendall(head.encode() + body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return read_http_response(s)
    finally:
        s.close()


# ----------------------------------------------------------------------------- assertions

def error_body(msg):
    return compact({"error": msg}).encode()


def assert_error(resp, status, msg):
    """Status, exact `{"error":"<msg>"}` body, JSON content type (nereid labels JSON bodies
    application/json, README "departs on purpose"), and a Content-Length that matches."""
    assert resp.status == status, f"expected {status} {msg!r}, got {resp!r}"
    assert resp.body == error_body(msg), f"expected body {error_body(msg)!r}, got {resp.body!r}"
    assert resp.header("Content-Type") == "application/json", resp.headers
    assert resp.header("Content-Length") == str(len(resp.body)), resp.headers


def assert_error_status(resp, status):
    """For answers whose text Triton never recorded: status + a non-empty JSON error string."""
    assert resp.status == status, f"expected {status}, got {resp!r}"
    assert resp.header("Content-Type") == "application/json", resp.headers
    err = resp.json()
    assert list(err) == ["error"] and isinstance(err["error"], str) and err["error"], resp.body


def first_difference(got, expected, context=60):
    """Where two texts first differ, with some context on each side (for assertion messages)."""
    n = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b),
             min(len(got), len(expected)))
    lo = max(0, n - context)
    return (f"first difference at offset {n}:\n expected ...{expected[lo:n + context]!r}\n"
            f" got      ...{got[lo:n + context]!r}")


def assert_json_ok(resp, expected_text):
    """200, application/json, and the exact body text."""
    assert resp.status == 200, resp
    assert resp.header("Content-Type") == "application/json", resp.headers
    assert resp.text == expected_text, first_difference(resp.text, expected_text)
    assert resp.header("Content-Length") == str(len(resp.body))


def assert_empty(resp, status):
    """Empty answers (health, ready, model ready): Content-Length 0, text/plain, as recorded."""
    assert resp.status == status, resp
    assert resp.body == b"", resp
    assert resp.header("Content-Length") == "0", resp.headers
    assert resp.header("Content-Type") == "text/plain", resp.headers


# ----------------------------------------------------------------------------- recordings

@lru_cache(maxsize=None)
def _recordings():
    out = {}
    with open(DATA_DIR / "triton_http.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out[d["what"]] = d
    return out


def recorded(what):
    """The recorded Triton 2.51 exchange whose `what` is `what` (spec/triton-answers/http.jsonl)."""
    return _recordings()[what]


def recorded_request_body(entry):
    r = entry["request"]
    if "body_b64" in r:
        return base64.b64decode(r["body_b64"])
    return r.get("body", "").encode() if r.get("body") is not None else None


def recorded_response_body(entry):
    if "body_b64" in entry:
        return base64.b64decode(entry["body_b64"])
    return (entry.get("body") or "").encode()


def assert_matches_recorded(resp, what, *, status=None, body=None, subst=()):
    """Compares an answer with the recorded one: status (or `status` where nereid departs on
    purpose), exact body (or `body`; `subst` = (old, new) byte pairs applied to the recorded
    body), Content-Length, Inference-Header-Content-Length, and the Content-Type, where JSON
    bodies are application/json (nereid's deliberate departure from Triton's text/plain on
    router errors, the 501 and model-ready answers) and empty ones text/plain as recorded."""
    e = recorded(what)
    exp_status = e["status"] if status is None else status
    exp_body = recorded_response_body(e) if body is None else body
    for old, new in subst:
        exp_body = exp_body.replace(old, new)
    rh = e.get("response_headers", {})
    assert resp.status == exp_status, f"{what}: expected {exp_status}, got {resp!r}"
    if exp_body != resp.body and resp.body[:1] in b"{[" and exp_body[:1] in b"{[":
        try:
            got_j, exp_j = json.loads(resp.body), json.loads(exp_body)
        except ValueError:
            got_j = exp_j = None
        assert got_j == exp_j, f"{what}:\n expected {exp_body!r}\n got      {resp.body!r}"
    assert resp.body == exp_body, f"{what}: body " + first_difference(resp.body, exp_body)
    if exp_body == b"":
        exp_ct = rh.get("content-type", "text/plain")
    elif rh.get("content-type") == "application/octet-stream":
        exp_ct = "application/octet-stream"
    else:
        exp_ct = "application/json"
    assert resp.header("Content-Type") == exp_ct, f"{what}: {resp.headers}"
    assert resp.header("Content-Length") == str(len(resp.body)), f"{what}: {resp.headers}"
    ihcl = rh.get("inference-header-content-length")
    assert resp.header("Inference-Header-Content-Length") == ihcl, f"{what}: {resp.headers}"


def replay(port, what, *, drop=("host",)):
    """Sends the recorded request of `what` unchanged (Host rewritten to this server)."""
    e = recorded(what)
    r = e["request"]
    hdrs = [(k, v) for k, v in r["headers"].items() if k.lower() not in drop]
    body = recorded_request_body(e)
    if body == b"" and "content-length" not in {k.lower() for k, _ in hdrs}:
        body = None
    return request(port, r["method"], r["path"], body=body, headers=hdrs)


# ----------------------------------------------------------------------------- reference

def ort_run(model_path, feeds):
    """Runs the model file with onnxruntime's Python API. BF16 tensors are passed and returned
    as uint16 arrays holding the raw bfloat16 bits."""
    import onnxruntime as ort
    from onnx import TensorProto

    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    if not any(i.type == "tensor(bfloat16)" for i in sess.get_inputs()):
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(None, feeds)))
    io = sess.io_binding()
    for name, arr in feeds.items():
        io.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            np.ascontiguousarray(arr, dtype=np.uint16), onnx_element_type=TensorProto.BFLOAT16))
    outs = {}
    for o in sess.get_outputs():  # identity: output shape == the input's
        buf = np.zeros_like(next(iter(feeds.values())), dtype=np.uint16)
        io.bind_ortvalue_output(o.name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            buf, onnx_element_type=TensorProto.BFLOAT16))
        outs[o.name] = buf
    sess.run_with_iobinding(io)
    return outs


def bf16_bits(f32):
    """Top 2 bytes of each little-endian float32 (tritonclient's BF16 encoding)."""
    return (np.asarray(f32, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bytes_tensor(elements):
    """BYTES wire encoding: uint32 LE length + bytes, per element."""
    return b"".join(struct.pack("<I", len(e)) + e for e in elements)


def wait_for(pred, within, what):
    """Polls pred() every 50 ms; fails the test if it is not true within `within` seconds
    (a bound on waiting for something that must happen, not a timing assertion)."""
    import pytest
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    pytest.fail(f"{what} did not happen within {within} s")


def infer_simple(client, a, b):
    """`simple` (INPUT0 + INPUT1, INPUT0 - INPUT1, INT32 [1,16]) through a tritonclient.http
    client; returns the result."""
    import tritonclient.http as httpclient
    inputs = [httpclient.InferInput("INPUT0", list(a.shape), "INT32"),
              httpclient.InferInput("INPUT1", list(b.shape), "INT32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    return client.infer("simple", inputs)
