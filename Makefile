# Thin wrapper: CMake does the build. `make` builds into build/, `make test` installs missing
# packages and runs every test plain and under ASan+UBSan, `make demo` runs the main job on the
# bundled simulator, `make bench` prints the performance figures, `make soak` runs the long
# randomized kill soak (tools/chaos_soak.c; SOAK_ROUNDS rounds or SOAK_MINUTES, whichever ends
# first, SOAK_JOBS rounds at once; SOAK_SEED to start from a given seed; then SOAK_PG_ROUNDS or
# SOAK_PG_MINUTES of two hosts on a PostgreSQL queue), `make fuzz` runs the
# libFuzzer targets of tests/fuzz/ (clang) for FUZZ_SECONDS each.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
# Most tests wait (settle delays, leases, stalls) rather than compute: two at a time per core.
CTEST_JOBS ?= $(shell echo $$(( 2 * $$(nproc 2>/dev/null || echo 2) )))
CTEST_ARGS ?=
SOAK_ROUNDS  ?= 1000
SOAK_MINUTES ?= 75
SOAK_JOBS    ?= 4
SOAK_SEED    ?=
SOAK_PG_ROUNDS  ?= 500
SOAK_PG_MINUTES ?= 45
FUZZ_BUILD ?= build-fuzz
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=

# Every C file clang-format keeps in shape; `make format` rewrites them, CI runs format-check.
FORMAT_FILES = $(wildcard bot/*.[ch] bot/*/*.[ch] include/apbot/*.h fixtures/erp-sim/*.[ch] \
                 tests/*.c tests/helpers/*.[ch] tests/fuzz/*.[ch] tools/*.c)

.PHONY: all deps test-deps build test test-plain test-asan test-fuzz-build fuzz fuzz-build demo \
        bench soak clean format format-check design-table

all: build

# `make` and `make demo` install what building and running need; `make test` adds the
# test-only packages (headless Chromium, Node.js).
deps:
	@scripts/deps.sh

test-deps:
	@scripts/deps.sh --test

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

test: test-deps test-plain test-asan test-fuzz-build

test-plain: test-deps build
	cd $(BUILD) && ctest --output-on-failure -j $(CTEST_JOBS) $(CTEST_ARGS)

test-asan: test-deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DAPBOT_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(CTEST_JOBS) -LE 'classic|soak' $(CTEST_ARGS)

# The fuzz targets are built by `make test` wherever clang is (so they never rot), never run
# there: a run takes FUZZ_SECONDS per target. `make fuzz FUZZ_SECONDS=600 FUZZ_TARGETS="page"`.
test-fuzz-build: deps
	@if command -v $(FUZZ_CC) >/dev/null 2>&1; then \
	    $(MAKE) --no-print-directory fuzz-build; \
	else \
	    echo "fuzz targets not built: no $(FUZZ_CC) (tests/fuzz/README.md)"; \
	fi

# -O1 -g without NDEBUG: asserts stay on, the instrumented code stays fast enough.
fuzz-build:
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=$(FUZZ_CC) -DAPBOT_FUZZ=ON \
	    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers

fuzz: deps
	@scripts/deps.sh clang
	$(MAKE) --no-print-directory fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

demo: build
	scripts/demo.sh $(BUILD)

bench: build test-deps
	scripts/bench.sh $(BUILD)

# Rounds are mostly waiting (leases, settle delays, stalls): several at once on 2 cores, niced
# because the machine may be shared. Exits non-zero on any violation, keeping its round. Then the
# PostgreSQL rounds (--pg: two hosts, server restarts and crashes; SOAK_PG_ROUNDS rounds or
# SOAK_PG_MINUTES, a PostgreSQL server of each job's own, `make test-deps` installs it).
soak: build
	nice -n 10 $(BUILD)/chaos-soak --rounds $(SOAK_ROUNDS) --minutes $(SOAK_MINUTES) \
	  --jobs $(SOAK_JOBS) $(if $(SOAK_SEED),--seed $(SOAK_SEED),)
	nice -n 10 $(BUILD)/chaos-soak --pg --rounds $(SOAK_PG_ROUNDS) --minutes $(SOAK_PG_MINUTES) \
	  --jobs $(SOAK_JOBS) $(if $(SOAK_SEED),--seed $(SOAK_SEED),)

format:
	clang-format -i $(FORMAT_FILES)

# docs/design.md's state table, printed from machine.c (tests/t_design.sh checks they agree).
design-table: build
	@$(BUILD)/machine-table > $(BUILD)/machine-table.md
	@sed -i -e '/^<!-- machine-table:begin -->$$/,/^<!-- machine-table:end -->$$/{//!d}' \
	    -e '/^<!-- machine-table:begin -->$$/r $(BUILD)/machine-table.md' docs/design.md
	@echo "docs/design.md: state table written from machine.c"

format-check:
	clang-format --dry-run -Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
