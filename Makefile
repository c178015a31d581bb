# SPDX-License-Identifier: GPL-2.0
# Deferred user-space callchains for perf: the testbed. Each target runs one
# script of harness/, which a person can also run by hand.

.PHONY: all check demo tree export patch series series-check kernel bench-kernel perf \
	selftests clean compare-base bench-processing bench-record bench-idle bench-python \
	stress fuzz-attr fuzz-perf fuzz-perf-seeds boot-count

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

# What reading a deferred recording costs next to plain fp (ratios): CPU
# time and instructions on VM recordings, then peak RSS and instructions on
# 5 M synthesized samples (BENCH_LARGE; about an hour, valgrind).
bench-processing:
	harness/bench-processing

# What recording costs: no callchain, fp, fp,defer, dwarf (medians, ratios,
# the README's performance table and chart).
bench-record:
	harness/bench-record

# Debian's python3 under each call-graph mode (the README's table).
bench-python:
	harness/bench-python

# What the feature costs when nobody profiles: the base kernel against this
# one, no perf event open, instruction counts (the README's table).
bench-idle:
	harness/bench-idle

# Random perf_event_attrs, ioctls, mmaps, forks and execs on the test kernel
# for FUZZ_S seconds (default 1800; FUZZ_SEED replays a run): no kernel
# report, no hang, no leak.
fuzz-attr:
	harness/fuzz-attr

# Fork, exec, signal, uprobe, compat and io_uring storms under many fp,defer
# events on the test kernel, with every invariant checked (STRESS_S seconds,
# default 600; make check runs it for STRESS_S=30 seconds).
stress:
	harness/stress

# Damaged fp,defer recordings (aimed mutations, zzuf) through perf script,
# report, inject and report -D, perf built with ASAN and UBSan (FUZZ_N
# iterations, default 300, or FUZZ_S seconds): fresh recordings of the test
# kernel and the committed seeds (make check runs 15 on the seeds alone).
fuzz-perf:
	harness/fuzz-perf

# Record the committed seed recordings of the perf fuzzer anew, in the VM.
fuzz-perf-seeds:
	harness/fuzz-perf --record-seeds

# Boot the test kernel and the base kernel with the same configuration,
# BOOTS times each (default 50), and count the boots with a kernel report.
boot-count: tree
	harness/build-kernel base-test >/dev/null
	harness/build-kernel test >/dev/null
	VM_LA57=1 harness/boot-count base-test $${BOOTS:-50}
	VM_LA57=1 harness/boot-count test $${BOOTS:-50}

tree:
	harness/assemble

export:
	harness/export

patch:
	harness/combined-patch

# The overlay as a patch series in build/series: a cover letter and one
# patch per topic, in git format-patch form (series/README).
series:
	harness/series

# The series applied with git am to the pristine base, checkpatch.pl on every
# patch and its message, and every step built (make check runs all but the
# builds).
series-check:
	harness/series-check

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
		build/bench-processing-large \
		build/bench-record build/perf-asan build/fuzz build/kernel-base-test \
		build/boot-count build/series build/series-check build/progs
