"""Model repositories in object storage (issue #40): `--model-repository=s3://host:port/bucket/path`
against a local S3 server (moto, server mode, with its IAM authentication on, so every request
nereid signs is checked) and `gs://bucket/path` against a local Cloud Storage emulator
(gcp-storage-emulator). The models load from the bucket; polling sees a model added, a version
added and a model deleted while loaded; explicit mode loads a model uploaded after start; a
missing bucket, wrong credentials and Azure's as:// stop the server with a clear error; the
credential file (TRITON_CLOUD_CREDENTIAL_PATH) wins over the environment; an object key that
would climb out of its model directory is skipped.

No test asserts on wall-clock time; deadlines only bound how long a test waits."""
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import boto3
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

import models
from conftest import free_port, listening, run_cli
from e2e_util import get, post, wait_for

BIN = Path(sys.executable).parent
BUCKET = "nereid-models"
A = np.arange(16, dtype=np.int32).reshape(1, 16)
B = np.full((1, 16), 3, dtype=np.int32)


def start_service(argv, port, log, env=None):
    proc = subprocess.Popen(argv, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                            env=env or os.environ.copy())
    wait_for(lambda: listening(port) or proc.poll() is not None, 60, f"{argv[0]} listening")
    assert proc.poll() is None, Path(log).read_text()
    return proc


@pytest.fixture
def moto(tmp_path):
    """A moto S3 server that authenticates every request after the three that make its IAM
    user (so nereid's SigV4 signatures are checked), with a bucket."""
    port = free_port()
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3")
    proc = start_service([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], port,
                         tmp_path / "moto.log", env)
    ep = f"http://127.0.0.1:{port}"
    iam = boto3.client("iam", endpoint_url=ep, aws_access_key_id="setup",
                       aws_secret_access_key="setup", region_name="us-east-1")
    iam.create_user(UserName="nereid")
    iam.put_user_policy(UserName="nereid", PolicyName="s3", PolicyDocument=json.dumps(
        {"Version": "2012-10-17",
         "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    key = iam.create_access_key(UserName="nereid")["AccessKey"]
    s3 = boto3.client("s3", endpoint_url=ep, aws_access_key_id=key["AccessKeyId"],
                      aws_secret_access_key=key["SecretAccessKey"], region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    yield SimpleNamespace(port=port, s3=s3, key_id=key["AccessKeyId"],
                          secret=key["SecretAccessKey"], proc=proc,
                          url=f"s3://127.0.0.1:{port}/{BUCKET}/models")
    if proc.poll() is None:
        proc.terminate()
    proc.wait(30)


@pytest.fixture
def aws_env(moto, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", moto.key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto.secret)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("TRITON_CLOUD_CREDENTIAL_PATH", raising=False)
    return moto


def s3_upload(s3, local_dir, prefix):
    for f in sorted(Path(local_dir).rglob("*")):
        if f.is_file():
            s3.upload_file(str(f), BUCKET, f"{prefix}/{f.relative_to(local_dir)}")


def s3_delete(s3, prefix):
    for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", []):
        s3.delete_object(Bucket=BUCKET, Key=o["Key"])


def index(port):
    r = post(port, "/v2/repository/index")
    assert r.status == 200, r
    return {(e["name"], e.get("version"), e.get("state"), e.get("reason")) for e in r.json()}


def infer_simple(client):
    mod = httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient
    ins = [mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")]
    ins[0].set_data_from_numpy(A)
    ins[1].set_data_from_numpy(B)
    r = client.infer("simple", ins)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), A + B)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), A - B)


def infer_identity(url):
    c = httpclient.InferenceServerClient(url)
    x = np.array([[1.5, -2.0, 3.25]], dtype=np.float32)
    i = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    np.testing.assert_array_equal(c.infer("identity_fp32", [i]).as_numpy("OUTPUT0"), x)


def test_s3_repository_is_polled(server_factory, aws_env, tmp_path):
    moto = aws_env
    local = tmp_path / "local"
    for name in ("simple", "identity_fp32", "identity_bytes"):
        models.write_model(local, name)
    s3_upload(moto.s3, local / "simple", "models/simple")
    s3_upload(moto.s3, local / "identity_fp32", "models/identity_fp32")
    # a key naming a file outside its model's directory
    moto.s3.put_object(Bucket=BUCKET, Key="models/simple/../../escape.txt", Body=b"x")
    srv = server_factory([moto.url], ["--model-control-mode=poll", "--repository-poll-secs=1"])
    infer_simple(httpclient.InferenceServerClient(srv.url))
    infer_simple(grpcclient.InferenceServerClient(srv.grpc_url))
    infer_identity(srv.url)
    assert "object 'models/simple/../../escape.txt' of " in srv.log
    assert not list(Path("/tmp").glob("escape.txt"))

    s3_upload(moto.s3, local / "identity_bytes", "models/identity_bytes")  # a new model
    wait_for(lambda: ("identity_bytes", "1", "READY", None) in index(srv.port), 60,
             "the uploaded model loaded by a poll")
    s3_upload(moto.s3, local / "simple" / "1", "models/simple/2")  # a new version
    wait_for(lambda: ("simple", "2", "READY", None) in index(srv.port), 60,
             "the uploaded version loaded by a poll")
    infer_simple(httpclient.InferenceServerClient(srv.url))
    s3_delete(moto.s3, "models/identity_fp32/")  # deleted while loaded
    wait_for(lambda: get(srv.port, "/v2/models/identity_fp32/ready").status != 200, 60,
             "the deleted model unloaded by a poll")
    assert not [e for e in index(srv.port) if e[0] == "identity_fp32"]  # nor in the index
    assert "successfully unloaded 'identity_fp32' version 1" in srv.log

    # the bucket unreachable: the polls fail, and what serves keeps serving
    moto.proc.terminate()
    moto.proc.wait(30)
    wait_for(lambda: "failed to poll model repository" in srv.log, 60, "a failed poll")
    wait_for(lambda: srv.log.count("failed to poll model repository") >= 2, 60,
             "a second failed poll")
    infer_simple(httpclient.InferenceServerClient(srv.url))
    assert get(srv.port, "/v2/models/identity_bytes/ready").status == 200


def test_s3_explicit_load_after_upload(server_factory, aws_env, tmp_path):
    moto = aws_env
    local = tmp_path / "local"
    models.write_model(local, "simple")
    models.write_model(local, "identity_fp32")
    s3_upload(moto.s3, local / "simple", "models/simple")
    srv = server_factory([moto.url], ["--model-control-mode=explicit", "--load-model=simple"])
    infer_simple(httpclient.InferenceServerClient(srv.url))
    assert ("identity_fp32", None, None, None) not in index(srv.port)
    s3_upload(moto.s3, local / "identity_fp32", "models/identity_fp32")
    assert ("identity_fp32", None, None, None) in index(srv.port)  # the index reads the bucket
    assert post(srv.port, "/v2/repository/models/identity_fp32/load").status == 200
    infer_identity(srv.url)
    r = post(srv.port, "/v2/repository/models/absent/load")
    assert r.status != 200 and r.json()["error"] == (
        "failed to load 'absent', failed to poll from model repository"), r.json()


def test_s3_errors_stop_the_server(aws_env, tmp_path, monkeypatch):
    moto = aws_env
    p = run_cli([f"--model-repository=s3://127.0.0.1:{moto.port}/no-such-bucket/models"])
    err = p.stderr.decode() + p.stdout.decode()
    assert p.returncode == 1 and "Unable to create S3 filesystem client. Check account " \
        "credentials." in err and "NoSuchBucket" in err, err
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    p = run_cli([f"--model-repository={moto.url}"])
    err = p.stderr.decode() + p.stdout.decode()
    assert p.returncode == 1 and "SignatureDoesNotMatch" in err, err
    p = run_cli(["--model-repository=as://account/container/models"])
    err = p.stderr.decode() + p.stdout.decode()
    assert p.returncode != 0 and "Azure Storage (as://) is not supported" in err, err


def test_s3_credential_file_wins_over_the_environment(server_factory, aws_env, tmp_path,
                                                       monkeypatch):
    moto = aws_env
    local = tmp_path / "local"
    models.write_model(local, "simple")
    s3_upload(moto.s3, local / "simple", "models/simple")
    cred = tmp_path / "cred.json"
    cred.write_text(json.dumps({"s3": {
        "": {"key_id": "wrong", "secret_key": "wrong", "region": "us-east-1"},
        f"s3://127.0.0.1:{moto.port}/{BUCKET}": {"key_id": moto.key_id,
                                                  "secret_key": moto.secret,
                                                  "region": "us-east-1"}}}))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    monkeypatch.setenv("TRITON_CLOUD_CREDENTIAL_PATH", str(cred))
    srv = server_factory([moto.url])
    infer_simple(httpclient.InferenceServerClient(srv.url))


# ------------------------------------------------------------------------------- GCS

@pytest.fixture
def gcs(tmp_path, monkeypatch):
    port = free_port()
    proc = start_service([str(BIN / "gcp-storage-emulator"), "start", "--host", "127.0.0.1",
                          "--port", str(port), "--in-memory"], port, tmp_path / "gcs.log")
    ep = f"http://127.0.0.1:{port}"
    req = urllib.request.Request(f"{ep}/storage/v1/b?project=test", method="POST",
                                 data=json.dumps({"name": BUCKET}).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
    monkeypatch.setenv("CLOUD_STORAGE_EMULATOR_ENDPOINT", ep)
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    yield SimpleNamespace(ep=ep, url=f"gs://{BUCKET}/models")
    proc.terminate()
    proc.wait(30)


def gcs_upload(ep, local_dir, prefix):
    for f in sorted(Path(local_dir).rglob("*")):
        if f.is_file():
            name = urllib.request.quote(f"{prefix}/{f.relative_to(local_dir)}", safe="")
            req = urllib.request.Request(
                f"{ep}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name={name}",
                method="POST", data=f.read_bytes(),
                headers={"Content-Type": "application/octet-stream"})
            urllib.request.urlopen(req).read()


def test_gcs_repository(server_factory, gcs, tmp_path):
    local = tmp_path / "local"
    models.write_model(local, "simple")
    models.write_model(local, "identity_fp32")
    gcs_upload(gcs.ep, local / "simple", "models/simple")
    srv = server_factory([gcs.url], ["--model-control-mode=explicit", "--load-model=*"])
    infer_simple(httpclient.InferenceServerClient(srv.url))
    infer_simple(grpcclient.InferenceServerClient(srv.grpc_url))
    gcs_upload(gcs.ep, local / "identity_fp32", "models/identity_fp32")
    assert post(srv.port, "/v2/repository/models/identity_fp32/load").status == 200
    infer_identity(srv.url)
    gcs_upload(gcs.ep, local / "simple" / "1", "models/simple/2")  # a change, then a reload
    assert post(srv.port, "/v2/repository/models/simple/load").status == 200
    assert ("simple", "2", "READY", None) in index(srv.port)


def test_gcs_missing_bucket(gcs):
    p = run_cli(["--model-repository=gs://no-such-bucket/models"])
    err = p.stderr.decode() + p.stdout.decode()
    assert p.returncode == 1 and "Unable to create GCS filesystem client" in err and \
        "HTTP 404" in err, err


class GoogleFront:
    """A token endpoint (RFC 7523: checks the service account's JWT, its RS256 signature with
    the account's public key, audience, scope and lifetime) and, in front of the emulator, a
    Cloud Storage endpoint that serves only requests bearing the token it issued."""

    def __init__(self, emulator, public_key):
        import base64
        import http.server
        import threading
        import time
        import urllib.parse
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        front = self
        self.port = free_port()
        self.token_uri = f"http://127.0.0.1:{self.port}/token"
        self.tokens = 0
        self.refused = []

        def b64d(s):
            return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def reply(self, status, body, ctype="application/json"):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                form = urllib.parse.parse_qs(
                    self.rfile.read(int(self.headers["Content-Length"])).decode())
                try:
                    assert form["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
                    head, claims, sig = form["assertion"][0].split(".")
                    public_key.verify(b64d(sig), f"{head}.{claims}".encode(),
                                      padding.PKCS1v15(), hashes.SHA256())
                    h, c = json.loads(b64d(head)), json.loads(b64d(claims))
                    assert h["alg"] == "RS256" and h["kid"] == "key-1"
                    assert c["iss"] == "nereid@test.iam.gserviceaccount.com"
                    assert c["aud"] == front.token_uri
                    assert c["scope"] == "https://www.googleapis.com/auth/devstorage.read_only"
                    assert c["iat"] <= time.time() + 5 < c["exp"]
                except Exception as e:  # what Google answers a bad assertion
                    front.refused.append(repr(e))
                    return self.reply(400, json.dumps({
                        "error": "invalid_grant",
                        "error_description": "Invalid JWT Signature."}).encode())
                front.tokens += 1
                self.reply(200, json.dumps({"access_token": f"tok-{front.tokens}",
                                            "expires_in": 3599,
                                            "token_type": "Bearer"}).encode())

            def do_GET(self):
                if self.headers.get("Authorization") != f"Bearer tok-{front.tokens}":
                    front.refused.append(self.path)
                    return self.reply(401, json.dumps({"error": {
                        "code": 401, "message": "Invalid Credentials"}}).encode())
                try:
                    with urllib.request.urlopen(emulator + self.path) as r:
                        self.reply(r.status, r.read(), r.headers["Content-Type"])
                except urllib.error.HTTPError as e:
                    self.reply(e.code, e.read())

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def service_account(tmp_path, token_uri, key):
    from cryptography.hazmat.primitives import serialization
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path = tmp_path / f"sa-{id(key)}.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "test", "private_key_id": "key-1",
        "private_key": pem, "client_email": "nereid@test.iam.gserviceaccount.com",
        "token_uri": token_uri}))
    return path


def test_gcs_service_account(server_factory, gcs, tmp_path, monkeypatch):
    """A service account's key (named for the path by TRITON_CLOUD_CREDENTIAL_PATH's "gs"
    section): nereid signs a JWT, exchanges it for a token and sends the token with every
    request; a key the token endpoint does not accept stops the server with its answer."""
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    front = GoogleFront(gcs.ep, key.public_key())
    try:
        local = tmp_path / "local"
        models.write_model(local, "simple")
        gcs_upload(gcs.ep, local / "simple", "models/simple")
        monkeypatch.setenv("CLOUD_STORAGE_EMULATOR_ENDPOINT", f"http://127.0.0.1:{front.port}")
        cred = tmp_path / "cred.json"
        sa = service_account(tmp_path, front.token_uri, key)
        cred.write_text(json.dumps({"gs": {f"gs://{BUCKET}": str(sa)}}))
        monkeypatch.setenv("TRITON_CLOUD_CREDENTIAL_PATH", str(cred))
        srv = server_factory([gcs.url])
        infer_simple(httpclient.InferenceServerClient(srv.url))
        assert front.tokens == 1 and front.refused == [], front.refused

        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        cred.write_text(json.dumps({"gs": {"": str(service_account(tmp_path, front.token_uri,
                                                                    other))}}))
        p = run_cli([f"--model-repository={gcs.url}"])
        err = p.stderr.decode() + p.stdout.decode()
        assert p.returncode == 1 and "failed to get a Google access token from " \
            f"{front.token_uri}: HTTP 400: Invalid JWT Signature." in err, err
    finally:
        front.close()
