# nereid - build, models, tests, benchmarks.
#   make run     set up everything missing, build, generate models, serve examples/model_repository
#   make check   while working: build, the layer check, the unit tests and the end-to-end tests
#                that are not timing-bound, in parallel (docs/reliability.md, "What runs where")
#   make test    everything CI runs: check's tests, the timing-bound e2e files once, then the
#                ASan+UBSan and TSan variants and the fuzzers (ci-sanitize)
#   make asan    ASan+UBSan build in build/asan: unit tests and the end-to-end suite
#   make tsan    TSan build in build/tsan: the end-to-end tests that load the server concurrently
#   make fuzz    libFuzzer targets (linked from build/asan's objects), each for FUZZ_SECONDS
#   make image   the runtime container image, with buildah (deploy/container/Containerfile)
# ORT_HOME may point at an official ONNX Runtime release layout (include/, lib/).

ORT_HOME ?= $(CURDIR)/.deps/ort
VENV     ?= $(CURDIR)/.venv
PY       := $(VENV)/bin/python
BUILD    ?= build
CC       ?= cc

PKGS     := libmicrohttpd zlib grpc libprotobuf-c libarchive libcurl libxml-2.0
CFLAGS   ?= -O2 -g
# `override`: a CFLAGS given on the command line (make CFLAGS="-O1 -fsanitize=...") gets these
# appended too, as one from the environment does.
# -fPIC: the same objects make the binaries and libnereid.so (nereid.h, the C API); within one
# binary the linker still binds every call directly, and -fno-semantic-interposition lets the
# compiler inline across a file's own external functions as it would without -fPIC.
override CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
            -pthread -MMD -MP -fPIC -fno-semantic-interposition -I$(ORT_HOME)/include \
            -I$(ORT_HOME)/include/onnxruntime -I$(BUILD)/gen \
            $(shell pkg-config --cflags libxml-2.0 2>/dev/null)
LDLIBS   += -Wl,-rpath,'$$ORIGIN/../lib/nereid:$(ORT_HOME)/lib' \
            $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lnuma -lm -pthread

LIB_SRC  := $(wildcard src/common/*.c src/config/*.c src/proto/*.c src/core/*.c src/backends/*.c \
              src/backends/*/*.c src/frontends/*/*.c src/api/*.c)
# The gRPC messages (the frontend's and the tools'): protoc-c turns each src/proto/<p>.proto into
# $(BUILD)/gen/proto/<p>.pb-c.{c,h} at build time (never committed; included as
# "proto/<p>.pb-c.h"); the .c files go into libnereid.a.
PROTO_DIR := src/proto
PROTO_SRC := $(wildcard $(PROTO_DIR)/*.proto)
GEN_C    := $(PROTO_SRC:$(PROTO_DIR)/%.proto=$(BUILD)/gen/proto/%.pb-c.c)
GEN_H    := $(GEN_C:.c=.h)
# The Python backend's stub sources, compiled in as byte arrays (scripts/embed.sh): a stub
# process gets them from nereid itself, so nothing is installed beside the binary.
PY_STUB_SRC := src/backends/python/stub/nereid_stub.py \
               src/backends/python/stub/triton_python_backend_utils.py
GEN_C    += $(BUILD)/gen/python/py_sources.c
GEN_OBJ  := $(GEN_C:$(BUILD)/gen/%.c=$(BUILD)/obj/gen/%.o)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(GEN_OBJ)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# The fuzz drivers (tests/fuzz/fuzz_<t>.c). `make unit` replays each one's seed
# corpus and kept crashers (tests/fuzz/{corpus,regress}/<t>/) without libFuzzer.
FUZZ_TARGETS := config config_json infer_json infer_binary http grpc
REPLAY_BIN   := $(FUZZ_TARGETS:%=$(BUILD)/tests/replay_%)

.PHONY: all setup gpu-backend models run test unit e2e bench clean install image asan asan-unit asan-e2e tsan fuzz \
        fuzz-build ci-sanitize check-layers check e2e-fast e2e-timed unit-build san-build asan-build \
        tsan-build
all: $(BUILD)/bin/nereid $(BUILD)/bin/nereid-perf $(BUILD)/bin/nereid-analyzer \
     $(BUILD)/lib/libnereid.so $(BUILD)/bin/nereid-embed

# libnereid.so: the server as a library (include/nereid.h), only the nereid_* functions
# exported; it finds ONNX Runtime where `make install` puts it ($ORIGIN/nereid) or, in the
# build tree, in ORT_HOME.
$(BUILD)/lib/libnereid.so: $(LIB_OBJ) scripts/nereid.map
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libnereid.so -Wl,--version-script=scripts/nereid.map \
	    -Wl,-rpath,'$$ORIGIN/nereid:$(ORT_HOME)/lib' $(filter %.o,$^) -o $@ \
	    $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lnuma -lm -pthread

# examples/embed.c: a program that embeds nereid through nereid.h and libnereid.so alone.
$(BUILD)/bin/nereid-embed: examples/embed.c include/nereid.h $(BUILD)/lib/libnereid.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude $< -o $@ -L$(BUILD)/lib -lnereid -Wl,-rpath,'$$ORIGIN/../lib:$(ORT_HOME)/lib' \
	    -pthread

# nereid-perf (src/tools/perf): perf_analyzer's drop-in; it links nereid's common code and the
# gRPC messages (libnereid.a), gRPC's C core and protobuf-c.
PERF_SRC := $(wildcard src/tools/perf/*.c)
$(BUILD)/bin/nereid-perf: $(PERF_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/libnereid.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(shell pkg-config --libs grpc libprotobuf-c 2>/dev/null) -lcrypto -lm -pthread

# nereid-analyzer (src/tools/analyzer): Model Analyzer's counterpart; it measures with
# nereid-perf's engine (every perf object but its main), reads configs with src/config and
# its -f YAML file with libyaml.
PERF_ENGINE_OBJ := $(filter-out %/perf_main.o,$(PERF_SRC:%.c=$(BUILD)/obj/%.o))
ANALYZER_SRC := $(wildcard src/tools/analyzer/*.c)
$(BUILD)/bin/nereid-analyzer: $(ANALYZER_SRC:%.c=$(BUILD)/obj/%.o) $(PERF_ENGINE_OBJ) \
                              $(BUILD)/libnereid.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(shell pkg-config --libs grpc libprotobuf-c 2>/dev/null) -lyaml -lcrypto -lm \
	    -pthread

# Keep the test objects (make would delete them as intermediates and rebuild every time).
.SECONDARY:

# Every object waits for the generated headers (order-only: a header that changes later reaches
# the objects that include it through their .d files).
$(BUILD)/obj/%.o: %.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# One protoc-c run writes both files of a pair (a pattern rule with two targets is one recipe).
$(BUILD)/gen/proto/%.pb-c.c $(BUILD)/gen/proto/%.pb-c.h: $(PROTO_DIR)/%.proto
	@mkdir -p $(dir $@)
	protoc-c --c_out=$(BUILD)/gen/proto --proto_path=$(PROTO_DIR) $<

$(BUILD)/gen/python/py_sources.c: $(PY_STUB_SRC) scripts/embed.sh
	@mkdir -p $(dir $@)
	scripts/embed.sh $@ nr_py_stub_source $(word 1,$(PY_STUB_SRC)) \
	    nr_py_utils_source $(word 2,$(PY_STUB_SRC))

$(GEN_OBJ): $(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libnereid.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $(filter %.o,$^)

$(BUILD)/bin/nereid: $(BUILD)/obj/src/main.o $(BUILD)/libnereid.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/libnereid.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# test_gpu runs against a stand-in for the NVIDIA driver library (tests/unit/fake_libcuda.c),
# built without sanitizers: it only answers the five calls GPU discovery makes.
$(BUILD)/tests/fake_cuda/libcuda.so.1: tests/unit/fake_libcuda.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -shared -fPIC -Wl,-soname,libcuda.so.1 $< -o $@
$(BUILD)/tests/test_gpu: | $(BUILD)/tests/fake_cuda/libcuda.so.1
# nereid-perf's histogram is tested on its own (the tool's objects are not in libnereid.a)
$(BUILD)/tests/test_perf_hist: $(BUILD)/obj/tests/unit/test_perf_hist.o \
                              $(BUILD)/obj/src/tools/perf/perf_hist.o $(BUILD)/libnereid.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ -lm -pthread

$(BUILD)/obj/tests/fuzz/%.o: override CFLAGS += -DNR_SRC_ROOT=\"$(CURDIR)\"
$(BUILD)/obj/tests/fuzz/replay_%.o: tests/fuzz/replay_main.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DNR_FUZZ_NAME=\"$*\" -c $< -o $@

$(BUILD)/tests/replay_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(BUILD)/obj/tests/fuzz/replay_%.o \
                         $(BUILD)/libnereid.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# libFuzzer binaries (clang only; `make fuzz-build` links them from build/asan's objects).
$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(BUILD)/libnereid.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $^ -o $@ $(LDLIBS)

# Installs what is missing (Debian packages, ONNX Runtime, the Python venv); idempotent.
setup:
	@ORT_HOME="$(ORT_HOME)" VENV="$(VENV)" scripts/setup.sh

# The onnxruntime-gpu build of ONNX Runtime (CUDA 13, TensorRT 10) as a backend directory, for
# `nereid --backend-directory=$(GPU_BACKENDS)` on a GPU machine; the e2e tests check its CUDA and
# TensorRT error paths on a machine without one (docs/optimization.md, "GPUs").
GPU_ORT_WHEEL ?= onnxruntime-gpu==1.31.1
GPU_BACKENDS  ?= $(CURDIR)/.deps/backends-gpu
gpu-backend: setup
	@VENV="$(VENV)" scripts/ort_libs.sh $(GPU_ORT_WHEEL) $(GPU_BACKENDS)/onnxruntime

models: setup
	$(PY) examples/gen_models.py examples/model_repository

run: setup all models
	$(BUILD)/bin/nereid --model-repository=$(CURDIR)/examples/model_repository

unit-build: $(UNIT_BIN) $(REPLAY_BIN)

# Each test binary ends with "<name>: N passed, N failed"; the last line sums them.
unit: $(UNIT_BIN) $(REPLAY_BIN) models
	@$(PY) tests/unit/gen_test_models.py tests/unit/models >/dev/null
	@pass=0; fail=0; for t in $(UNIT_BIN) $(REPLAY_BIN); do \
	    $$t > $(BUILD)/tests/last.log 2>&1; rc=$$?; cat $(BUILD)/tests/last.log; \
	    line=$$(tail -n 1 $(BUILD)/tests/last.log); \
	    p=$$(echo "$$line" | sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed.*/\1/p'); \
	    f=$$(echo "$$line" | sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed.*/\2/p'); \
	    if [ -z "$$p" ]; then p=0; f=1; echo "$$t crashed (exit $$rc)"; fi; \
	    if [ $$rc -ne 0 ] && [ "$$f" = 0 ]; then f=1; fi; \
	    pass=$$((pass + p)); fail=$$((fail + f)); done; \
	echo "unit: $$pass passed, $$fail failed"; test $$fail -eq 0

# The e2e tiers. The timing-bound files measure over wall-clock windows with nereid-perf,
# perf_analyzer, nereid-analyzer and Model Analyzer; test_image.py builds the container image
# (minutes of I/O); test_replicas.py loads three replicas behind HAProxy. They run alone, once, without sanitizers (e2e-timed). Every other file runs
# in parallel (pytest-xdist, E2E_JOBS workers; each server binds its own free port): e2e-fast,
# also under ASan and, the concurrent-load ones, TSan.
E2E_TIMED := tests/e2e/test_perf.py tests/e2e/test_perf_analyzer.py tests/e2e/test_analyzer.py \
             tests/e2e/test_model_analyzer.py tests/e2e/test_image.py tests/e2e/test_replicas.py
E2E_FAST  := $(filter-out $(E2E_TIMED),$(sort $(wildcard tests/e2e/test_*.py)))
E2E_JOBS  ?= 3
E2E_ARGS  ?=
E2E_ENV    = NEREID_BIN=$(CURDIR)/$(BUILD)/bin/nereid NEREID_GPU_BACKENDS=$(GPU_BACKENDS)

e2e-fast: all models
	$(E2E_ENV) $(PY) -m pytest -q -n $(E2E_JOBS) $(E2E_ARGS) $(E2E_FAST)

e2e-timed: all models
	$(E2E_ENV) $(PY) -m pytest -q $(E2E_ARGS) $(E2E_TIMED)

e2e: e2e-fast e2e-timed

# No #include goes up a layer or across frontends (docs/architecture.md, "Layers").
check-layers:
	@python3 tests/check_layers.py

JOBS ?= $(shell nproc 2>/dev/null || echo 2)

# The tier to run while working: everything but the sanitizers, the fuzzers and the timing-bound
# e2e files.
check: setup check-layers
	$(MAKE) -j$(JOBS) all unit-build
	$(MAKE) models gpu-backend
	$(MAKE) unit
	$(MAKE) e2e-fast

# $(call stage,<name>,<make arguments>): a sub-make whose wall time goes to $(STAGES), which
# `make test` prints at its end (the durations in the docs come from it, not by hand).
STAGES = build/stages.txt
stage = +@t0=$$(date +%s); $(MAKE) $(2); rc=$$?; \
	echo "$(1): $$(( $$(date +%s) - t0 )) s$$( [ $$rc -eq 0 ] || echo ' (failed)')" >> $(STAGES); \
	exit $$rc

# Everything CI runs, cheapest and most likely to fail first.
test: setup check-layers
	@mkdir -p build; rm -f $(STAGES)
	$(call stage,build (gcc; ASan+UBSan with fuzzer coverage; TSan),-j$(JOBS) all unit-build san-build)
	$(call stage,models and the GPU backend,models gpu-backend)
	$(call stage,unit,unit)
	$(call stage,e2e in parallel,e2e-fast)
	$(call stage,ASan+UBSan unit,asan-unit)
	$(call stage,ASan+UBSan e2e in parallel,asan-e2e)
	$(call stage,TSan e2e,tsan)
	$(call stage,e2e timing-bound files alone,e2e-timed)
	$(call stage,fuzzers $(CI_FUZZ_SECONDS) s each,fuzz FUZZ_SECONDS=$(CI_FUZZ_SECONDS))
	@echo "make test: every stage passed"; cat $(STAGES)

# ---- sanitizers and fuzzing (docs/reliability.md) ----------------------------
# Each variant builds into its own directory with clang; build/ is untouched. Both define
# NR_DEBUG: the threading contract's assertions (common/debug.h) are on. The ASan+UBSan
# objects also carry libFuzzer's coverage (-fsanitize=fuzzer-no-link): one build serves the unit
# tests, the server the e2e suite runs and the fuzz binaries (the coverage costs the e2e suite
# under ASan nothing measurable: 31.3 s without, 32.2 s with).
SAN_CC      ?= clang
SAN_DIR     := $(CURDIR)/tests/sanitizers
ASAN_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
               -fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link -DNR_DEBUG
TSAN_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=thread -DNR_DEBUG
FUZZ_SECONDS ?= 600
FUZZ_JOBS    ?= $(JOBS)
ASAN_MAKE    = CC=$(SAN_CC) CFLAGS="$(ASAN_CFLAGS)" $(MAKE) BUILD=build/asan
TSAN_MAKE    = CC=$(SAN_CC) CFLAGS="$(TSAN_CFLAGS)" $(MAKE) BUILD=build/tsan
# Reports go to files under <build>/san-logs (the e2e suite keeps the server's
# console in temporary files); a run fails if any report was written.
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:log_path=$(CURDIR)/build/asan/san-logs/asan \
           LSAN_OPTIONS=suppressions=$(SAN_DIR)/lsan.supp:print_suppressions=0 \
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(CURDIR)/build/asan/san-logs/ubsan
TSAN_ENV = TSAN_OPTIONS=suppressions=$(SAN_DIR)/tsan.supp:log_path=$(CURDIR)/build/tsan/san-logs/tsan:halt_on_error=0:second_deadlock_stack=1
# The e2e sets: the suite but its timing-bound files under ASan, and the concurrent-load files,
# dynamic batching included, under TSan, in parallel; then, one at a time, the nereid-perf
# tests marked load_threads (its own load threads, under TSan too).
ASAN_E2E    ?= $(E2E_FAST)
TSAN_E2E    ?= tests/e2e/test_concurrency.py tests/e2e/test_connections.py tests/e2e/test_stats.py \
               tests/e2e/test_infer_binary.py tests/e2e/test_dynamic_batching.py \
               tests/e2e/test_shared_memory.py tests/e2e/test_grpc.py tests/e2e/test_metrics.py \
               tests/e2e/test_model_control.py tests/e2e/test_ensemble.py \
               tests/e2e/test_python_backend.py tests/e2e/test_generate.py
TSAN_PERF   ?= -m load_threads tests/e2e/test_perf.py
# The core's unit tests that run instance threads, the scheduler and the repository's reaper.
TSAN_UNIT   := test_core test_scheduler test_repository test_ensemble test_capi
san_check = @if ls $(1)/san-logs/* >/dev/null 2>&1; then cat $(1)/san-logs/*; \
	echo "sanitizer reports in $(1)/san-logs"; exit 1; fi; echo "$(1): no sanitizer reports"
# When the tests fail (a server that wrote a report exits with the sanitizer's code), the
# reports are printed last, where CI's tail of the output shows them.
san_dump = for f in $(1)/san-logs/*; do [ -f "$$f" ] && { echo "==== $$f"; cat "$$f"; }; done
san_dump_tsan = $(call san_dump,build/tsan)
san_dump_asan = $(call san_dump,build/asan)

# Every sanitizer build at once (make -j: the three variants' objects in parallel).
san-build: asan-build tsan-build
asan-build:
	+$(ASAN_MAKE) all unit-build $(FUZZ_TARGETS:%=build/asan/fuzz/fuzz_%)
tsan-build:
	+$(TSAN_MAKE) all $(TSAN_UNIT:%=build/tsan/tests/%)

asan-unit: setup models
	@rm -rf build/asan/san-logs; mkdir -p build/asan/san-logs
	+$(ASAN_ENV) $(ASAN_MAKE) unit
	$(call san_check,build/asan)

# E2E_TESTS: which e2e files (default: ASAN_E2E)
asan-e2e: setup models
	+$(ASAN_MAKE) all
	@rm -rf build/asan/san-logs; mkdir -p build/asan/san-logs
	$(ASAN_ENV) NEREID_BIN=$(CURDIR)/build/asan/bin/nereid $(PY) -m pytest -q -n $(E2E_JOBS) \
	    $(E2E_ARGS) $(or $(E2E_TESTS),$(ASAN_E2E)) || { $(san_dump_asan); exit 1; }
	$(call san_check,build/asan)

asan: asan-unit asan-e2e

# E2E_TESTS: which e2e files (default: TSAN_E2E, then TSAN_PERF)
tsan: setup models
	+$(TSAN_MAKE) all $(TSAN_UNIT:%=build/tsan/tests/%)
	@rm -rf build/tsan/san-logs; mkdir -p build/tsan/san-logs
	@for t in $(TSAN_UNIT); do $(TSAN_ENV) build/tsan/tests/$$t > build/tsan/$$t.log 2>&1 || \
	    { cat build/tsan/$$t.log; exit 1; }; tail -n 1 build/tsan/$$t.log; done
	$(TSAN_ENV) NEREID_BIN=$(CURDIR)/build/tsan/bin/nereid $(PY) -m pytest -q -n $(E2E_JOBS) \
	    $(E2E_ARGS) $(or $(E2E_TESTS),$(TSAN_E2E)) || { $(san_dump_tsan); exit 1; }
	$(if $(E2E_TESTS),,$(TSAN_ENV) NEREID_BIN=$(CURDIR)/build/tsan/bin/nereid $(PY) -m pytest -q \
	    $(E2E_ARGS) $(TSAN_PERF) || { $(san_dump_tsan); exit 1; })
	$(call san_check,build/tsan)

fuzz-build: setup models
	+$(ASAN_MAKE) $(FUZZ_TARGETS:%=build/asan/fuzz/fuzz_%)

# Runs each target for FUZZ_SECONDS on a scratch copy of its corpus, FUZZ_JOBS at a time (new
# inputs land in build/fuzz/corpus/<t>; crashers in build/fuzz/crash/<t>/). Keep a crasher by
# copying it to tests/fuzz/regress/<t>/ once it is fixed.
fuzz: fuzz-build
	@printf '%s\n' $(FUZZ_TARGETS) | xargs -P $(FUZZ_JOBS) -I{} sh -c '\
	    t={}; mkdir -p build/fuzz/corpus/$$t build/fuzz/crash/$$t; \
	    $(ASAN_ENV_FUZZ) build/asan/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	        -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
	        -artifact_prefix=build/fuzz/crash/$$t/ build/fuzz/corpus/$$t \
	        tests/fuzz/corpus/$$t $$(ls -d tests/fuzz/regress/$$t 2>/dev/null) \
	        2>build/fuzz/fuzz_$$t.log || { echo "fuzz_$$t failed:"; tail -n 60 build/fuzz/fuzz_$$t.log; exit 1; }; \
	    echo "fuzz_$$t: $(FUZZ_SECONDS) s, $$(grep -E "stat::number_of_executed_units" build/fuzz/fuzz_$$t.log | \
	        sed "s/.*: *//") runs, $$(grep -E "stat::new_units_added" build/fuzz/fuzz_$$t.log | \
	        sed "s/.*: *//") new inputs"'
ASAN_ENV_FUZZ = LSAN_OPTIONS=suppressions=$(SAN_DIR)/lsan.supp:print_suppressions=0

# What `make test` (and so CI) adds after the gcc build's tests: ASan+UBSan unit tests (with
# the fuzz regression replay), the e2e suite under ASan, the concurrent-load e2e tests under
# TSan, and each fuzzer for CI_FUZZ_SECONDS.
CI_FUZZ_SECONDS ?= 15
ci-sanitize:
	$(MAKE) asan-unit
	$(MAKE) asan-e2e
	$(MAKE) tsan
	$(MAKE) fuzz FUZZ_SECONDS=$(CI_FUZZ_SECONDS)

bench: setup all models $(BUILD)/bin/bench-ort-direct $(BUILD)/bin/bench-grpc-load \
       $(BUILD)/bin/bench-capi-load
	$(PY) bench/run.py
	$(PY) bench/protocols.py
	$(PY) bench/threads.py
	$(PY) bench/optimization.py
	$(PY) bench/model_control.py
	$(PY) bench/warmup.py
	$(PY) bench/host_policy.py
	$(PY) bench/accelerators.py
	$(PY) bench/perf_tools.py
	$(PY) bench/guide.py
	$(PY) bench/ensemble.py
	$(PY) bench/capi.py
	$(PY) bench/python_backend.py

# make install PREFIX=...: the binaries, libnereid.so with nereid.h and a pkg-config file, and
# the ONNX Runtime libraries the server opens ($(PREFIX)/lib/nereid, where libnereid.so and the
# binaries look first).
PREFIX ?= /usr/local
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	    $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/nereid
	install -m 755 $(BUILD)/bin/nereid $(BUILD)/bin/nereid-perf $(BUILD)/bin/nereid-analyzer \
	    $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BUILD)/lib/libnereid.so $(DESTDIR)$(PREFIX)/lib
	install -m 644 include/nereid.h $(DESTDIR)$(PREFIX)/include
	cp -a $(ORT_HOME)/lib/. $(DESTDIR)$(PREFIX)/lib/nereid/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(shell sed -n 's/.*NR_VERSION "\(.*\)".*/\1/p' src/common/version.h)|g' \
	    scripts/nereid.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/nereid.pc

# The runtime image (deploy/container/Containerfile) with buildah; scripts/image.sh says how the
# base is chosen. IMAGE=name:tag names it.
image: all
	BUILD=$(BUILD) scripts/image.sh

clean:
	rm -rf $(BUILD)

-include $(LIB_OBJ:.o=.d) $(BUILD)/obj/src/main.d $(wildcard $(BUILD)/obj/tests/*/*.d) \
         $(wildcard $(BUILD)/obj/src/tools/*/*.d)

$(BUILD)/bin/bench-ort-direct: bench/ort_direct.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ -L$(ORT_HOME)/lib -lonnxruntime $(LDLIBS)

# Requests through the C API, in-process (bench/capi.py)
$(BUILD)/bin/bench-capi-load: bench/capi_load.c include/nereid.h $(BUILD)/lib/libnereid.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude $< -o $@ -L$(BUILD)/lib -lnereid -Wl,-rpath,'$$ORIGIN/../lib:$(ORT_HOME)/lib' \
	    -pthread

# The JSON infer request parser alone (bench/infer_parse.c; run by hand)
$(BUILD)/bin/bench-infer-parse: bench/infer_parse.c $(BUILD)/libnereid.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# gRPC's C client as a load generator (bench/protocols.py)
$(BUILD)/bin/bench-grpc-load: bench/grpc_load.c src/proto/grpc_lib.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
