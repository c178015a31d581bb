#!/bin/bash
# perf inject copies a pipe's tracing data
# SPDX-License-Identifier: GPL-2.0
#
# In a pipe, HEADER_TRACING_DATA's payload (the tracepoints' formats)
# follows the event outside its size. perf inject wrote the event alone
# and read on into the payload as if it were events: it failed on every
# pipe of a tracepoint recording. Injected into a file and into a pipe,
# such a recording must read as the input does.

set -e

err=0
tmpdir=$(mktemp -d /tmp/__perf_test.inject_tracing_data.XXXXX)

cleanup() {
	rm -rf "${tmpdir}"
	trap - EXIT TERM INT
}

# shellcheck disable=SC2317 # called by the trap
trap_cleanup() {
	echo "Unexpected signal in ${FUNCNAME[1]}"
	cleanup
	exit 1
}
trap trap_cleanup EXIT TERM INT

if ! perf record -q -e sched:sched_switch -a -o - -- sleep 0.1 \
	>"${tmpdir}/in.pipe" 2>"${tmpdir}/record.err"; then
	echo "Skip: cannot record sched:sched_switch"
	cleanup
	exit 2
fi
perf script -i - <"${tmpdir}/in.pipe" >"${tmpdir}/in.script"
if ! grep -q sched_switch "${tmpdir}/in.script"; then
	echo "FAIL: perf script shows no sched_switch of the recording"
	err=1
fi

# into a file, whose data then hold the formats; into a pipe
if ! perf inject -i - -o "${tmpdir}/out.data" <"${tmpdir}/in.pipe"; then
	echo "FAIL: perf inject of the pipe into a file"
	err=1
elif ! perf script -i "${tmpdir}/out.data" >"${tmpdir}/file.script" ||
	! cmp -s "${tmpdir}/in.script" "${tmpdir}/file.script"; then
	echo "FAIL: the injected file does not read as the pipe"
	err=1
fi
if ! perf inject -i - -o - <"${tmpdir}/in.pipe" >"${tmpdir}/out.pipe"; then
	echo "FAIL: perf inject of the pipe into a pipe"
	err=1
elif ! perf script -i - <"${tmpdir}/out.pipe" >"${tmpdir}/pipe.script" ||
	! cmp -s "${tmpdir}/in.script" "${tmpdir}/pipe.script"; then
	echo "FAIL: the injected pipe does not read as the input"
	err=1
fi

cleanup
exit ${err}
