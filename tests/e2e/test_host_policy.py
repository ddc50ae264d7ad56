"""NUMA host policies (issue #18): --host-policy=<name>,<setting>=<value> with cpu-cores and
numa-node, taken by instances through instance_group host_policy or Triton's default names
("cpu" for KIND_CPU instances). The instance thread and the ONNX Runtime threads of its session
are pinned (read back from /proc/<pid>/task/*/status); bad policies stop the server at start
with what is wrong. This machine class has one NUMA node and two cores."""
import os

import pytest

import models
from e2e_util import infer_json

IDENT = {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                     "data": [1.0, 2.0, 3.0, 4.0]}]}


def threads(pid):
    """[(thread name, Cpus_allowed_list)] of every thread of pid."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                st = dict(ln.rstrip("\n").split(":\t", 1) for ln in f if ":\t" in ln)
        except FileNotFoundError:
            continue
        out.append((st["Name"], st["Cpus_allowed_list"]))
    return out


def all_cpus():
    return sorted(os.sched_getaffinity(0))


needs_two = pytest.mark.skipif(len(all_cpus()) < 2, reason="needs two cores")


def repo_with(tmp_path, policy=None):
    repo = tmp_path / "repo"
    d = models.write_model(repo, "identity_fp32")
    if policy:
        cfg = (d / "config.pbtxt").read_text().replace(
            "count: 1 }", f'count: 1, host_policy: "{policy}" }}')
        (d / "config.pbtxt").write_text(cfg)
    return repo


@needs_two
def test_default_cpu_policy_pins_instance_and_session_threads(server_factory, tmp_path):
    core = all_cpus()[-1]
    srv = server_factory([repo_with(tmp_path)], [f"--host-policy=cpu,cpu-cores={core}"])
    t = threads(srv.proc.pid)
    inst = [c for n, c in t if n.startswith("identity_fp32_0")]
    assert inst == [str(core)], t
    pinned = [n for n, c in t if c == str(core)]
    assert len(pinned) >= 2, t  # the instance thread and its session's intra-op worker
    # the loading thread got its own affinity back: the others are not pinned
    assert any(c != str(core) for n, c in t), t
    r = infer_json(srv.port, "identity_fp32", IDENT)
    assert r.status == 200 and r.json()["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0], r


@needs_two
def test_named_policy_and_numa_node(server_factory, tmp_path):
    first = all_cpus()[0]
    srv = server_factory([repo_with(tmp_path, "p")],
                         [f"--host-policy=p,cpu-cores={first}-{first}", "--host-policy=q,numa-node=0"])
    inst = [c for n, c in threads(srv.proc.pid) if n.startswith("identity_fp32_0")]
    assert inst == [str(first)]
    assert infer_json(srv.port, "identity_fp32", IDENT).status == 200
    srv.stop()
    srv = server_factory([repo_with(tmp_path / "b", "q")], ["--host-policy=q,numa-node=0"],
                         name="numa")
    with open("/sys/devices/system/node/node0/cpulist") as f:
        node0 = f.read().strip()
    inst = [c for n, c in threads(srv.proc.pid) if n.startswith("identity_fp32_0")]
    assert inst == [node0], (inst, node0)
    assert infer_json(srv.port, "identity_fp32", IDENT).status == 200


@needs_two
def test_warmup_runs_under_the_instance_policy(server_factory, tmp_path):
    """Warmup runs on the loading thread (the main one) before the instance's own thread starts:
    under the instance's host policy for the while, so its work runs on the instance's cores and
    memory node. Watched from /proc during a long warmup (300,000 runs of identity_fp32): the
    loading thread is pinned to the policy's core while it runs, and has its own affinity back
    once the server is ready."""
    import time
    core = all_cpus()[-1]
    repo = tmp_path / "repo"
    d = models.write_model(repo, "identity_fp32")
    (d / "config.pbtxt").write_text(models.config_identity("identity_fp32") + (
        'model_warmup [ { name: "long" batch_size: 1 count: 300000 inputs { key: "INPUT0" '
        'value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n'))
    srv = server_factory([repo], [f"--host-policy=cpu,cpu-cores={core}"], wait=False)
    pid, seen = srv.proc.pid, set()
    deadline = time.time() + 120
    while time.time() < deadline and srv.proc.poll() is None:
        try:
            with open(f"/proc/{pid}/task/{pid}/status") as f:
                st = dict(ln.rstrip("\n").split(":\t", 1) for ln in f if ":\t" in ln)
            seen.add(st["Cpus_allowed_list"])
        except FileNotFoundError:
            break
        if any(n.startswith("identity_fp32_0") for n, _ in threads(pid)):
            break  # the instance thread starts after warmup
        time.sleep(0.005)
    assert str(core) in seen, seen
    srv.wait_live()
    pid = srv.proc.pid  # (wait_live starts it again on other ports if its port was taken)
    with open(f"/proc/{pid}/task/{pid}/status") as f:
        assert f"Cpus_allowed_list:\t{str(core)}\n" not in f.read()
    assert infer_json(srv.port, "identity_fp32", IDENT).status == 200


@pytest.mark.parametrize("flag, text", [
    ("--host-policy=p,numa-node=1", "setting 'numa-node' names node 1; this machine has NUMA "
                                    "nodes 0-0"),
    ("--host-policy=p,cpu-cores=x", "host policy setting 'cpu-cores' format is "
                                    "'<lower_cpu_core_id>-<upper_cpu_core_id>'. Got x"),
    ("--host-policy=p,cpu-cores=0-4096", "setting 'cpu-cores' names cores 0-4096"),
    ("--host-policy=p,bogus-key=1", "error: setting host policy: Unsupported - Unsupported host "
                                    "policy setting 'bogus-key' is specified, supported settings "
                                    "are 'numa-node', 'cpu-cores'"),
    ("--host-policy=p", "Bad option: \"--host-policy\".\n--host-policy option format is "
                        "'<policy name>,<setting>=<value>'. Got p"),
])
def test_bad_policies_stop_the_server(server_factory, tmp_path, flag, text):
    if "numa-node=1" in flag and os.path.exists("/sys/devices/system/node/node1"):
        pytest.skip("this machine has a NUMA node 1")
    srv = server_factory([repo_with(tmp_path)], [flag], expect_rc=1, wait=False)
    assert srv.wait_exit() == 1
    assert text in srv.log, srv.log[-2000:]
