PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-fast interop rocketmq rocketmq-rust hadoop jars audit-env audit-pack audit-cds sim bench audit
.PHONY: lint clean

setup: $(STAMP)

# pip byte-compiles what it installs one file after another; compileall does it on every core. In a fresh venv
# (2026-11-30): 54 s with pip compiling, 32 s without and 3 s for compileall -j0, the same 5,641 .pyc files.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q --no-compile -e '.[dev,bench,jepsen,audit]'
	$(BIN)/python -m compileall -q -j0 "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
	touch $(STAMP)

# A 3-node controller group on loopback, data under $(DATA); Ctrl-C stops it. Other ports or sizes:
# make run RUN_ARGS='--http-port 19770 --raft-port 19880'. From another terminal, while it runs:
# .venv/bin/controllerd local-cluster [--data DIR] status|stop n2|start n2|restart n2
# make run BROKERS=rocketmq: real RocketMQ brokers and a NameServer instead of the simulated brokers (it
# resolves RocketMQ's jars first, `make rocketmq`: Maven and Java; the default needs neither).
DATA ?= ./data
BROKERS ?= sim
run: setup $(if $(filter rocketmq,$(BROKERS)),rocketmq)
	$(BIN)/controllerd local-cluster --data $(DATA) --brokers $(BROKERS) $(RUN_ARGS)

# The lint, the Maven resolutions, the audit's packed environment and its class-data archive run side by side
# (-j4: mypy on the CPU while Maven and pip wait on the network and the disk; in a fresh clone, 2026-11-30: lint 39 s,
# pack 39 s, archive 39 s, one after the other 78 s of the 89 the step took); the two Maven builds one after the
# other (`jars`), never two Mavens on one local repository at once.
# tools/setup.sh installs with apt-get every program the tests run that is missing (the table of
# tools/programs.py); `tools.programs check` then fails, naming it, on a program the code runs that is not in
# that table or is not on this machine.
# The offline files run first on three workers, the real-RocketMQ interop files (tests/interop, docs/interop.md)
# after them on two, one file per worker (--dist loadfile: an interop file's world is module-scoped); files are
# handed out longest first (tests/conftest.py; --no-loadscope-reorder keeps that order). Measured 2026-11-30:
# - the offline files leave 0.7 of the 2 cores idle on two workers (elections, restarts, Spark, Jepsen's
#   time-bounded runs): three workers took 868-1,033 s against 984-1,130 on two, and passed;
# - the interop files on three: 645 s against 743-806 on two in a warm tree, but in a fresh clone two of the first
#   three files failed at load average 17 (three worlds of JVMs starting at once), so two;
# - one pytest for both on three workers: each of its three fresh runs failed a different test under its load
#   (load average 7-12); four workers failed three tests in the first minutes;
# - the offline files on four workers: 973 s and 1,432 CPU-s against 868 s and 1,245 on three (warm tree);
# - with RocketMQ's servers started without a self-signed certificate (tests/conftest.py), the interop files on
#   three: 632 s against 695 on two, and two tests failed (load average 12; in one, two of our three controllerd
#   nodes had logged only their config warning 60 s after their start).
# `hadoop` and `audit-env`: the audit's cluster test (tests/tools/audit/test_cluster.py) runs Hadoop's own HDFS
# and ships the executors' Python as a packed archive.
# The suite runs with bytecode caching on ($(PYC)). This machine kind sets PYTHONDONTWRITEBYTECODE=1, so no .pyc of
# the project was ever written: every controllerd, rmqctl and test subprocess compiled each module it imports from
# source, and pytest rewrote every test file in each worker (a collection: 12.6 s, 3.7 s from its cache). Measured
# 2026-11-30 on tests/cli and test_controllerd_processes.py (301 tests): 81-86 s without caching, 60-68 s with it.
# ALONGSIDE, an interop file that mostly waits (on the brokers' fixed 120 s controllerAddr tick, twice), runs beside
# the offline files instead of after them: its output is printed when both are done, and either failing fails the
# step. Measured 2026-11-30: alone, 264 s of wall and 124 CPU-s (0.47 of a core), while the offline files leave
# ~0.6 of the 2 cores idle and the interop files kept both workers busy for 668 s, this one 283 s of it.
# The two runs choose their explicit ports in blocks of their own (TEST_PORT_BLOCKS: the offline run's 3 workers
# take blocks 0-2, the ALONGSIDE run block 3; raft/testing/cluster.py's _block): two runs sharing a block let one
# take a port that the other's stopped controller was about to bind again.
PYC := env -u PYTHONDONTWRITEBYTECODE
ALONGSIDE := tests/interop/test_migration_dledger.py
ALONGSIDE_LOG := build/test-alongside.log
test: setup
	$(MAKE) --no-print-directory -j4 lint jars audit-env
	PYTHON=$(BIN)/python sh tools/setup.sh
	$(BIN)/python -m tools.programs check
	mkdir -p build; TEST_PORT_BLOCKS=4 TEST_PORT_BLOCK=3 $(PYC) $(BIN)/python -m pytest -q -m interop $(ALONGSIDE) \
	  > $(ALONGSIDE_LOG) 2>&1 & alongside=$$!; \
	TEST_PORT_BLOCKS=4 $(PYC) $(BIN)/python -m pytest -q -n 3 --dist loadgroup -m "not interop"; offline=$$?; \
	wait $$alongside; status=$$?; echo "$(ALONGSIDE), run beside the offline files:"; cat $(ALONGSIDE_LOG); \
	test $$offline -eq 0 && test $$status -eq 0
	$(PYC) $(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder -m interop --ignore=$(ALONGSIDE)

# Offline: no Maven, no RocketMQ, no real processes.
test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow and not interop"

# RocketMQ's own jars (interop/rocketmq/pom.xml) resolved from Maven Central into interop/rocketmq/build/lib,
# and the interop Java client compiled; cached (nothing is fetched again until pom.xml or src/ change).
rocketmq:
	sh interop/rocketmq/build.sh

# Hadoop's MiniDFSCluster (interop/hadoop/pom.xml, at the Hadoop version of PySpark's client) resolved from Maven
# Central into interop/hadoop/build/lib, its launcher compiled; cached like `rocketmq`.
hadoop:
	sh interop/hadoop/build.sh

jars:
	sh interop/rocketmq/build.sh
	sh interop/hadoop/build.sh

# Opt-in, not part of `make test`: mxsm/rocketmq-rust's controller (crates.io rocketmq-controller 1.0.0), the fourth
# system of `python -m tools.bench peers` (--systems rust, tools/bench/rust_peer.py), installed as
# build/rocketmq-rust/bin/rocketmq-controller-rust (or point $$ROCKETMQ_RUST_CONTROLLER at one built elsewhere).
# Needs cargo with Rust >= 1.95 (rustup) and libclang-dev (RocksDB's bindings; installed with apt-get when missing);
# compiles ~600 crates: ~47 min on 2 cores with 2 jobs (CARGO_BUILD_JOBS). Done when the binary is there.
RUST_CONTROLLER := build/rocketmq-rust/bin/rocketmq-controller-rust
rocketmq-rust: $(RUST_CONTROLLER)
$(RUST_CONTROLLER):
	@command -v cargo >/dev/null || { echo "make rocketmq-rust: no cargo here: install Rust (https://rustup.rs)" >&2; exit 1; }
	@dpkg -s libclang-dev >/dev/null 2>&1 || sh tools/apt-install.sh "make rocketmq-rust" libclang-dev
	cargo install --locked rocketmq-controller@1.0.0 --bin rocketmq-controller-rust --root build/rocketmq-rust

# The executors' Python for a cluster run of the audit: a venv with the pinned runtime dependencies, packed with
# venv-pack into build/audit-env.tar.gz (docs/audit.md, On a cluster); rebuilt when pyproject.toml changes. And the
# class-data archive the suite's local Spark JVMs map (tools/audit/cds.py), built once per Java and PySpark.
audit-env: audit-pack audit-cds
audit-pack: setup
	$(BIN)/python -m tools.audit.pack_env build/audit-env.tar.gz
audit-cds: setup
	$(BIN)/python -m tools.audit.cds build/spark-cds  # tools.audit.cds.DIR

# Unmodified RocketMQ brokers, NameServer, mqadmin and clients against our controller, and the differential
# test against RocketMQ's own JRaftController (docs/interop.md).
interop: setup rocketmq
	$(BIN)/python -m pytest -q -m interop

# More simulation seeds than CI runs: make sim SEEDS=10000
sim: setup
	RAFT_SIM_SEEDS=$(or $(SEEDS),5000) $(BIN)/python -m pytest -q -n 2 tests/raft/testing/test_sim.py

# Every figure of issue 14 in one run (docs/performance.md), ~25 min on 2 cores; HTTP load from wrk (C), installed with
# apt-get when missing (sh tools/setup.sh bench). make bench BENCH_ARGS='--quick' for a smoke run.
bench: setup
	PYTHON=$(BIN)/python sh tools/setup.sh bench || \
		echo "bench: wrk missing, HTTP rows fall back to the Python load generator"
	$(BIN)/python -m tools.bench all --json bench-all.json $(BENCH_ARGS)

# The offline Spark audit of data dirs (docs/audit.md): make audit DATA=./data OUT=/tmp/audit
audit: setup
	$(BIN)/rmq-audit $(if $(OUT),--out $(OUT)) $(or $(DATA),./data)

# ruff's linter and formatter, and mypy over the packages ([tool.mypy] in pyproject.toml says which and how).
# The formatter owns the layout: no `# fmt: skip` / `# fmt: off` markers that would take code out of its hands.
LINT_PATHS := raft snapshot statemachine api cli jepsen tests tools
lint: setup
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/python -m mypy
	$(BIN)/ruff format --check $(LINT_PATHS)
	@! grep -rnE --include='*.py' '#[[:space:]]*fmt:[[:space:]]*(skip|off)' $(LINT_PATHS) || \
		{ echo "lint: remove the fmt: markers above (the formatter owns the layout)"; exit 1; }

clean:
	rm -rf $(VENV) $(DATA) .pytest_cache .mypy_cache
