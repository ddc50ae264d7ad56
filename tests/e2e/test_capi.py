"""The public C API (issue #36): examples/embed.c, a program of its own that embeds nereid
through include/nereid.h and libnereid.so alone (build/bin/nereid-embed, built by `make`),
serves a request to `simple` with no port open, its outputs written into the program's own
buffers. tests/unit/test_capi.c covers the API itself (two servers in one process)."""
import os
import subprocess
from pathlib import Path

from conftest import ROOT, nereid_bin

EMBED = nereid_bin().parent / "nereid-embed"


def run(*args):
    return subprocess.run([str(EMBED), *args], capture_output=True, text=True, timeout=120)


def test_the_example_embeds_nereid_and_serves_without_a_socket():
    r = run(str(ROOT / "examples" / "model_repository"))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "ready: yes, sockets open: 0"
    assert lines[1] == ("OUTPUT0 INT32 [1,16] in the program's memory: "
                        + " ".join(str(i + 1) for i in range(16)))
    assert lines[2] == ("OUTPUT1 INT32 [1,16] in the program's memory: "
                        + " ".join(str(i - 1) for i in range(16)))
    assert lines[3:] == ["id: embedded-1", "simple: 1 inference(s), 1 execution(s)", "embed: ok"]
    # nothing but the library: no nereid symbol beyond the public API is needed
    deps = subprocess.run(["ldd", str(EMBED)], capture_output=True, text=True).stdout
    assert "libnereid.so" in deps


def test_the_example_reports_the_servers_error():
    r = run("/nonexistent-nereid-repository")
    assert r.returncode == 1
    assert r.stderr == ("embed: server: Internal - failed to stat file "
                        "/nonexistent-nereid-repository\n"), r.stderr
