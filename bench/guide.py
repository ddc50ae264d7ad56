#!/usr/bin/env python3
"""The optimization guide's perf_analyzer commands, run with nereid-perf (issue #21's "the guide,
reproduced"): each step of the guide adds its lines to inception_onnx's config.pbtxt from the
example repository, a nereid serves that repository alone, and the guide's command measures it
with nereid-perf, whose output is printed as it is. The guide's own figures (a GPU) are in
shared/spec/seed.md; docs/optimization.md has this machine's.

    .venv/bin/python bench/guide.py            # about 8 minutes
    GUIDE_STEPS=baseline,batcher .venv/bin/python bench/guide.py
    GUIDE_EXTRA=--report-unstable GUIDE_STEPS=both .venv/bin/python bench/guide.py
"""
import os, shutil, subprocess, sys, tempfile, time

from benchlib import NEREID, REPO, stop_server, wait_live

PERF = os.path.join(os.path.dirname(NEREID), "nereid-perf")
PORT = 18995
ONE = "instance_group [ { count: 1 kind: KIND_CPU } ]\n"
TWO = "instance_group [ { count: 2 kind: KIND_CPU } ]\n"
BATCHER = "dynamic_batching { }\n"
OPENVINO = ('optimization { execution_accelerators { cpu_execution_accelerator : '
            '[ { name : "openvino" } ] } }\n')
# (name, lines added to the config, the guide's command's flags)
STEPS = [
    ("baseline", ONE, ["--percentile=95", "--concurrency-range", "1:4"]),
    ("batcher", ONE + BATCHER, ["--percentile=95", "--concurrency-range", "1:8"]),
    ("instances", TWO, ["--percentile=95", "--concurrency-range", "1:4"]),
    ("both", TWO + BATCHER, ["--percentile=95", "--concurrency-range", "1:8"]),
    ("openvino", ONE + OPENVINO, ["--percentile=95", "--concurrency-range", "1:4"]),
]


def main():
    want = os.environ.get("GUIDE_STEPS")
    steps = [s for s in STEPS if not want or s[0] in want.split(",")]
    tmp = tempfile.mkdtemp(prefix="nereid-guide-")
    try:
        for name, lines, flags in steps:
            d = os.path.join(tmp, name, "inception_onnx")
            shutil.copytree(os.path.join(REPO, "inception_onnx"), d, symlinks=True)
            with open(os.path.join(d, "config.pbtxt"), "a") as f:
                f.write(lines)
            p = subprocess.Popen([NEREID, f"--model-repository={os.path.dirname(d)}",
                                  f"--http-port={PORT}", "--http-address=127.0.0.1",
                                  "--allow-grpc=false", "--allow-metrics=false"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_live(PORT, p, 180, "/v2/health/ready")
                flags = flags + os.environ.get("GUIDE_EXTRA", "").split()
                cmd = [PERF, "-m", "inception_onnx", "-u", f"localhost:{PORT}", *flags]
                print(f"## {name}: config.pbtxt + {lines.strip()!r}")
                print("$ nereid-perf -m inception_onnx " + " ".join(flags), flush=True)
                t0 = time.perf_counter()
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
                print(r.stdout + r.stderr, end="")
                print(f"(exit {r.returncode}, {time.perf_counter() - t0:.0f} s)\n", flush=True)
            finally:
                stop_server(p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
