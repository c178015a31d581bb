# SPDX-License-Identifier: GPL-2.0
# Deferred user-space callchains for perf: the testbed. Each target runs one
# script of harness/, which a person can also run by hand.

.PHONY: all check demo tree export patch kernel bench-kernel perf selftests clean \
	compare-base bench-processing bench-record

all: kernel perf selftests

# The test command: build, host tests, the test kernel in a VM, the tally.
check:
	harness/run-tests

# The main job: profile the demo workload with --call-graph fp,defer.
demo:
	harness/demo

# The base's perf test suite on the base kernel and on ours (long: TCG).
compare-base:
	harness/compare-base

# What reading a deferred recording costs next to plain fp (ratios).
bench-processing:
	harness/bench-processing

# What recording costs: no callchain, fp, fp,defer, dwarf (medians, ratios,
# the README's performance table and chart).
bench-record:
	harness/bench-record

tree:
	harness/assemble

export:
	harness/export

patch:
	harness/combined-patch

kernel: tree
	harness/build-kernel test

bench-kernel: tree
	harness/build-kernel bench

perf: tree
	harness/build-perf

selftests: kernel
	harness/build-selftests

clean:
	rm -rf build/kernel-test build/kernel-bench build/kernel-base build/perf build/perf-base \
		build/selftests build/vm build/demo build/compare build/bench-processing \
		build/bench-record
