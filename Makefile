# nereid - build, models, tests, benchmarks.
#   make run     set up everything missing, build, generate models, serve examples/model_repository
#   make test    set up everything missing, build, run the unit and end-to-end tests
# ORT_HOME may point at an official ONNX Runtime release layout (include/, lib/).

ORT_HOME ?= $(CURDIR)/.deps/ort
VENV     ?= $(CURDIR)/.venv
PY       := $(VENV)/bin/python
BUILD    ?= build
CC       ?= cc

PKGS     := libmicrohttpd zlib
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
            -pthread -MMD -MP -I$(ORT_HOME)/include -I$(ORT_HOME)/include/onnxruntime
LDLIBS   += -L$(ORT_HOME)/lib -Wl,-rpath,$(ORT_HOME)/lib -lonnxruntime \
            $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lnuma -lm -pthread

LIB_SRC  := $(wildcard src/common/*.c src/config/*.c src/core/*.c src/backends/*.c \
              src/backends/*/*.c src/frontends/*/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all setup models run test unit e2e bench clean
all: $(BUILD)/bin/nereid

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libnereid.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/bin/nereid: $(BUILD)/obj/src/main.o $(BUILD)/libnereid.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/libnereid.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# Installs what is missing (Debian packages, ONNX Runtime, the Python venv); idempotent.
setup:
	@ORT_HOME="$(ORT_HOME)" VENV="$(VENV)" scripts/setup.sh

models: setup
	$(PY) examples/gen_models.py examples/model_repository

run: setup all models
	$(BUILD)/bin/nereid --model-repository=$(CURDIR)/examples/model_repository

# Each test binary ends with "<name>: N passed, N failed"; the last line sums them.
unit: $(UNIT_BIN) models
	@$(PY) tests/unit/gen_test_models.py tests/unit/models >/dev/null
	@pass=0; fail=0; for t in $(UNIT_BIN); do \
	    $$t > $(BUILD)/tests/last.log 2>&1; rc=$$?; cat $(BUILD)/tests/last.log; \
	    line=$$(tail -n 1 $(BUILD)/tests/last.log); \
	    p=$$(echo "$$line" | sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed.*/\1/p'); \
	    f=$$(echo "$$line" | sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed.*/\2/p'); \
	    if [ -z "$$p" ]; then p=0; f=1; echo "$$t crashed (exit $$rc)"; fi; \
	    if [ $$rc -ne 0 ] && [ "$$f" = 0 ]; then f=1; fi; \
	    pass=$$((pass + p)); fail=$$((fail + f)); done; \
	echo "unit: $$pass passed, $$fail failed"; test $$fail -eq 0

e2e: all models
	NEREID_BIN=$(CURDIR)/$(BUILD)/bin/nereid $(PY) -m pytest -q tests/e2e

test: setup
	$(MAKE) all
	$(MAKE) models
	$(MAKE) unit
	$(MAKE) e2e

bench: setup all models $(BUILD)/bin/bench-ort-direct
	$(PY) bench/run.py

clean:
	rm -rf $(BUILD)

-include $(LIB_OBJ:.o=.d) $(BUILD)/obj/src/main.d

$(BUILD)/bin/bench-ort-direct: bench/ort_direct.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)
