"""64 concurrent clients x 100 requests each on `simple`, random data, every answer checked.
One tritonclient.http.InferenceServerClient per thread (as the client library expects)."""

import threading

import numpy as np
import tritonclient.http as httpclient

from e2e_util import get

THREADS = 64
REQUESTS = 100


def _worker(url, tid, barrier, errors, counts):
    rng = np.random.default_rng(1000 + tid)
    client = httpclient.InferenceServerClient(url=url, connection_timeout=120,
                                              network_timeout=120)
    binary = tid % 2 == 0
    try:
        barrier.wait()
        for i in range(REQUESTS):
            batch = int(rng.integers(1, 9))
            a = rng.integers(-2**30, 2**30, size=(batch, 16), dtype=np.int32)
            b = rng.integers(-2**30, 2**30, size=(batch, 16), dtype=np.int32)
            inputs = []
            for name, arr in (("INPUT0", a), ("INPUT1", b)):
                inp = httpclient.InferInput(name, [batch, 16], "INT32")
                inp.set_data_from_numpy(arr, binary_data=binary)
                inputs.append(inp)
            outputs = [httpclient.InferRequestedOutput(n, binary_data=(binary != (i % 3 == 0)))
                       for n in ("OUTPUT0", "OUTPUT1")]
            rid = f"t{tid}-r{i}"
            res = client.infer("simple", inputs, outputs=outputs, request_id=rid)
            resp = res.get_response()
            if resp.get("id") != rid:
                errors.append(f"{rid}: answer carries id {resp.get('id')!r}")
            if not np.array_equal(res.as_numpy("OUTPUT0"), a + b):
                errors.append(f"{rid}: OUTPUT0 wrong")
            if not np.array_equal(res.as_numpy("OUTPUT1"), a - b):
                errors.append(f"{rid}: OUTPUT1 wrong")
            counts[tid] += batch
    except Exception as e:  # noqa: BLE001 - report every failure, not just the first
        errors.append(f"thread {tid}: {type(e).__name__}: {e}")
    finally:
        client.close()


def test_64_clients_x_100_requests(main_server):
    before = get(main_server.port, "/v2/models/simple/stats").json()["model_stats"][0]
    errors, counts = [], [0] * THREADS
    barrier = threading.Barrier(THREADS)
    threads = [threading.Thread(target=_worker, args=(main_server.url, t, barrier, errors, counts))
               for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, f"{len(errors)} failures, first: {errors[:10]}"
    assert main_server.alive()
    after = get(main_server.port, "/v2/models/simple/stats").json()["model_stats"][0]
    st, bst = after["inference_stats"], before["inference_stats"]
    assert st["success"]["count"] - bst["success"]["count"] == THREADS * REQUESTS
    assert st["fail"]["count"] == bst["fail"]["count"]
    assert after["inference_count"] - before["inference_count"] == sum(counts)
    # no dynamic batcher on `simple`: one execution per request
    assert after["execution_count"] - before["execution_count"] == THREADS * REQUESTS


def test_concurrent_mixed_models(main_server):
    """Requests to several models at once (incl. the dynamic batcher) all answer correctly."""
    errors = []

    def run(model, tid):
        client = httpclient.InferenceServerClient(url=main_server.url)
        rng = np.random.default_rng(tid)
        try:
            for _ in range(30):
                x = rng.standard_normal((int(rng.integers(1, 9)), 5)).astype(np.float32)
                inp = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
                inp.set_data_from_numpy(x)
                res = client.infer(model, [inp])
                want = 2 * x if model == "two_versions" else x
                if not np.array_equal(res.as_numpy("OUTPUT0"), want):
                    errors.append(f"{model}: wrong answer")
        except Exception as e:  # noqa: BLE001
            errors.append(f"{model}: {type(e).__name__}: {e}")
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(m, i))
               for i, m in enumerate(["dyn_batch", "identity_fp32", "two_versions"] * 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:10]
