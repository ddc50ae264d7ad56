"""Compressed request bodies (Content-Encoding gzip / deflate = zlib-wrapped), compressed answers
(Accept-Encoding), 501 for other encodings, and what is never compressed."""

import base64
import gzip
import zlib

import numpy as np
import pytest
import tritonclient.http as httpclient

from e2e_util import (assert_error_status, assert_matches_recorded, compact, get, post,
                      recorded, replay)

SIMPLE_REQ = recorded("simple JSON in/out (INT32 [1,16])")["request"]["body"].encode()
SIMPLE_ANSWER = recorded("simple JSON in/out (INT32 [1,16])")["body"].encode()


def _post_simple(port, body, **headers):
    hdrs = {"Content-Type": "application/json"}
    hdrs.update({k.replace("_", "-"): v for k, v in headers.items()})
    return post(port, "/v2/models/simple/infer", body, hdrs)


def _decompress(encoding, data):
    return gzip.decompress(data) if encoding == "gzip" else zlib.decompress(data)


def _recorded_decompressed(what):
    e = recorded(what)
    if "body_decompressed_b64" in e:
        return base64.b64decode(e["body_decompressed_b64"])
    return e["body_decompressed"].encode()


# ----------------------------------------------------------------------------- request bodies

@pytest.mark.parametrize("what", [
    "simple gzip request body (Content-Encoding: gzip)",
    "simple deflate request body (Content-Encoding: deflate, zlib-wrapped)",
    "simple Content-Encoding: identity",
    "simple gzip request containing binary input (header length = uncompressed JSON length)",
])
def test_compressed_request_recorded(main_server, what):
    assert_matches_recorded(replay(main_server.port, what), what)


@pytest.mark.parametrize("encoding,compress", [("gzip", gzip.compress),
                                               ("deflate", zlib.compress)])
def test_compressed_request_fresh(main_server, encoding, compress):
    r = _post_simple(main_server.port, compress(SIMPLE_REQ), Content_Encoding=encoding)
    assert r.status == 200 and r.body == SIMPLE_ANSWER, r


@pytest.mark.parametrize("what", [
    "simple Content-Encoding: br (unsupported)",
    "simple Content-Encoding: GZIP (upper case)",
])
def test_unsupported_encoding_is_501(main_server, what):
    r = replay(main_server.port, what)
    assert_matches_recorded(r, what)
    assert r.body == b'{"error":"Unsupported compression type"}'
    assert r.header("Accept-Encoding") == "gzip, deflate", r.headers


@pytest.mark.parametrize("what", [
    "simple raw deflate (no zlib header) with Content-Encoding: deflate",
    "simple Content-Encoding: gzip but body not gzipped",
])
def test_body_that_fails_to_decompress_is_400(main_server, what):
    # Triton treats it as an empty raw request; nereid answers 400 (README departure). The text
    # is nereid's own: not pinned here.
    r = replay(main_server.port, what)
    assert_error_status(r, 400)
    assert "Raw request" not in r.json()["error"], r.body
    assert replay(main_server.port, "simple gzip request body (Content-Encoding: gzip)").status \
        == 200


def test_truncated_gzip_is_400(main_server):
    data = gzip.compress(SIMPLE_REQ)
    assert_error_status(_post_simple(main_server.port, data[:len(data) // 2],
                                     Content_Encoding="gzip"), 400)
    assert _post_simple(main_server.port, data, Content_Encoding="gzip").status == 200


# ----------------------------------------------------------------------------- answers

@pytest.mark.parametrize("what,encoding", [
    ("simple Accept-Encoding: gzip (JSON response)", "gzip"),
    ("simple Accept-Encoding: deflate (JSON response)", "deflate"),
    ("simple Accept-Encoding: gzip, deflate", "gzip"),
    ("simple Accept-Encoding: gzip;q=0.5", "gzip"),
    ("simple Accept-Encoding: gzip with binary output", "gzip"),
    ("identity_fp32 raw binary, Inference-Header-Content-Length: 0, Accept-Encoding gzip", "gzip"),
])
def test_compressed_answer(main_server, what, encoding):
    e = recorded(what)
    r = replay(main_server.port, what)
    assert r.status == 200, r
    assert r.header("Content-Encoding") == encoding, r.headers
    assert r.header("Content-Type") == e["response_headers"]["content-type"]
    assert r.header("Content-Length") == str(len(r.body))
    # Inference-Header-Content-Length refers to the uncompressed JSON header
    assert r.header("Inference-Header-Content-Length") == \
        e["response_headers"].get("inference-header-content-length")
    assert _decompress(encoding, r.body) == _recorded_decompressed(what)


@pytest.mark.parametrize("what", [
    "simple Accept-Encoding: br",
    "GET metadata with Accept-Encoding: gzip (not compressed?)",
    "error probe: missing input with Accept-Encoding: gzip (is the error compressed?)",
])
def test_not_compressed(main_server, what):
    r = replay(main_server.port, what)
    assert_matches_recorded(r, what)
    assert r.header("Content-Encoding") is None


def test_get_answers_never_compressed(main_server):
    for path in ("/v2", "/v2/models/simple/config", "/v2/models/simple/stats"):
        r = get(main_server.port, path, {"Accept-Encoding": "gzip, deflate"})
        assert r.status == 200 and r.header("Content-Encoding") is None, (path, r.headers)
        r.json()


# ----------------------------------------------------------------------------- tritonclient

@pytest.mark.parametrize("req_alg,resp_alg", [("gzip", None), ("deflate", None), (None, "gzip"),
                                              (None, "deflate"), ("gzip", "deflate"),
                                              ("deflate", "gzip")])
@pytest.mark.parametrize("binary", [True, False])
def test_tritonclient_compression(main_server, req_alg, resp_alg, binary):
    c = httpclient.InferenceServerClient(url=main_server.url)
    try:
        x = np.linspace(-5, 5, 40, dtype=np.float32).reshape(4, 10)
        i = httpclient.InferInput("INPUT0", [4, 10], "FP32")
        i.set_data_from_numpy(x, binary_data=binary)
        res = c.infer("identity_fp32", [i],
                      outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)],
                      request_compression_algorithm=req_alg,
                      response_compression_algorithm=resp_alg)
        np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), x)
    finally:
        c.close()


def test_large_compressible_body(main_server):
    """A 1 MiB JSON request (compresses ~100x) decompressed and served whole."""
    n = 1 << 17
    req = {"inputs": [{"name": "INPUT0", "shape": [1, n], "datatype": "FP32", "data": [0.5] * n}],
           "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
    r = post(main_server.port, "/v2/models/identity_fp32/infer", gzip.compress(compact(req).encode()),
             {"Content-Encoding": "gzip"})
    assert r.status == 200, r
    hlen = int(r.header("Inference-Header-Content-Length"))
    assert r.body[hlen:] == np.full(n, 0.5, np.float32).tobytes()
