# Makefile - the two commands (make run, make test) and the developer targets around them.
BUILD   ?= build
ASAN    ?= build-asan
TSAN    ?= build-tsan
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
SEEDS   ?= 500
STEPS   ?= 10000
CMAKE_FLAGS ?=

.PHONY: all deps configure build run test gen gen-check sim sim-bugs asan tsan e2e bench bench-single bench-cluster bench-etcd bench-auth fault torture clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/CMakeCache.txt:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

# Starts one slotd on 127.0.0.1:7700 with its data in ./slotd-data (Ctrl-C stops it).
run: build
	exec $(BUILD)/bin/slotd

# Every suite: generated-code freshness, unit, simulation, injected bugs, end-to-end, fault, deploy,
# ASan+UBSan and ThreadSanitizer (scripts/test.sh runs e2e with sim and sim-bugs side by side).
test: build
	@scripts/test.sh

gen: deps
	@scripts/gen.sh

gen-check: deps
	@scripts/test.sh gen

sim: build
	$(BUILD)/bin/raft-sim --seeds $(SEEDS) --steps $(STEPS)

sim-bugs: build
	@scripts/test.sh sim-bugs

asan: deps
	@scripts/test.sh asan

# ThreadSanitizer build in $(TSAN): the unit suites and a 3-node smoke with a leader kill
# (tests/tsan/README.md); any report fails.
tsan: deps
	@TSAN=$(TSAN) scripts/test.sh tsan

e2e: build
	@scripts/test.sh e2e

# Linearizability checker tests and a short randomized fault run against a real 3-node cluster.
fault: build
	@scripts/test.sh fault

# Longer fault schedules with a report: make torture TORTURE_SEED=1 TORTURE_ROUNDS=4 TORTURE_RUNS=3
TORTURE_SEED ?= 1
TORTURE_ROUNDS ?= 4
TORTURE_RUNS ?= 3
torture: build
	cmake -S . -B build-fault -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLOTD_FAULT=ON >/dev/null && cmake --build build-fault -j2 --target slotd
	SLOTD_BIN=$(CURDIR)/$(BUILD)/bin/slotd SLOTD_FAULT_BIN=$(CURDIR)/build-fault/bin/slotd /usr/bin/python3 tests/fault/torture.py \
	  --net --seed $(TORTURE_SEED) --rounds $(TORTURE_ROUNDS) --runs $(TORTURE_RUNS) --out torture-report.md

# slotd vs etcd (installs etcd-server if missing), 1 and 3 nodes, A/B rounds, ratios per row.
bench: build
	@scripts/bench/compare-etcd.sh

bench-etcd: bench

# slotd alone, one node: durable Propose/s and linearizable Get/s at 1/16/64/256 in flight.
# Durable put/s on one node with --auth 1 (a token on every call) vs --auth 0, medians side by side.
bench-auth: build
	@scripts/bench/auth.sh

# Backup and restore MB/s, slotd vs etcd 3.4, on a 1 GiB keyspace (BENCHMARKS.md).
bench-backup: build
	@scripts/bench/backup-etcd.sh

bench-single: build
	@scripts/bench.sh

# 3 nodes on loopback: Propose/s and linearizable Get/s direct to leaders vs through forwarding,
# then put/s steady vs during a 3 -> 5 balance (scripts/bench/balance-put.sh; BALANCE=0 skips).
bench-cluster: build
	@scripts/bench_cluster.sh


clean:
	rm -rf $(BUILD) $(ASAN) $(TSAN) build-bug-*

# Installs headers (slotd/client.h), libslotd (.a, .so.1 with soname), slotd.pc, slotctl and slotd
# under PREFIX: make install PREFIX=$HOME/.local (then pkg-config --cflags --libs slotd with
# PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig).
PREFIX ?= /usr/local
.PHONY: install
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)
