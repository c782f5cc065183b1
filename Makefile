# Thin wrapper: CMake does the build. `make` builds into build/, `make test` installs missing
# packages and runs every test plain and under ASan+UBSan, `make demo` runs the main job on the
# bundled simulator, `make bench` prints the performance figures.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CTEST_ARGS ?=

# Every C file clang-format keeps in shape; `make format` rewrites them, CI runs format-check.
FORMAT_FILES = $(wildcard bot/*.[ch] bot/cli/*.[ch] include/apbot/*.h fixtures/erp-sim/*.[ch] \
                 tests/*.c tests/helpers/*.[ch] tests/fuzz/*.c tools/*.c)

.PHONY: all deps deps-test build test test-plain test-asan demo bench clean format format-check

all: build

deps:
	@scripts/deps.sh

# What only the tests and the benchmark need (the PostgreSQL server); `make` never pulls it.
deps-test:
	@scripts/deps.sh --test

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

test: test-plain test-asan

test-plain: build deps-test
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

test-asan: deps deps-test
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DAPBOT_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

demo: build
	scripts/demo.sh $(BUILD)

bench: build deps-test
	scripts/bench.sh $(BUILD)

format:
	clang-format -i $(FORMAT_FILES)

format-check:
	clang-format --dry-run -Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
