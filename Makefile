# nereid - build, models, tests, benchmarks.
#   make run     set up everything missing, build, generate models, serve examples/model_repository
#   make test    set up everything missing, build, run the unit and end-to-end tests
# ORT_HOME may point at an official ONNX Runtime release layout (include/, lib/).

ORT_HOME ?= $(CURDIR)/.deps/ort
VENV     ?= $(CURDIR)/.venv
PY       := $(VENV)/bin/python
BUILD    ?= build
CC       ?= cc

PKGS     := libmicrohttpd jansson zlib
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

unit: $(UNIT_BIN) models
	@set -e; for t in $(UNIT_BIN); do $$t; done

e2e: all models
	NEREID_BIN=$(CURDIR)/$(BUILD)/bin/nereid $(PY) -m pytest -q tests/e2e

test: setup
	$(MAKE) all
	$(MAKE) models
	$(MAKE) unit
	$(MAKE) e2e

bench: setup all models
	$(PY) bench/run.py

clean:
	rm -rf $(BUILD)

-include $(LIB_OBJ:.o=.d) $(BUILD)/obj/src/main.d
