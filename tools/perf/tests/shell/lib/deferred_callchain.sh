# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# Shared by the deferred callchain shell tests: a temporary directory that
# goes on exit, failures counted in err, the join's summary read back.
# Set deferred_test to name the directory before sourcing this.

# shellcheck disable=SC2034 # the sourcing test reads it
err=0
tmpdir=$(mktemp -d "/tmp/__perf_test.${deferred_test:-deferred}.XXXXX")

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

fail() {
	echo "  FAIL: $*"
	# shellcheck disable=SC2034 # the sourcing test reads it
	err=1
}

# Runs "$@" and says how long it took: under emulation some parts take
# minutes, and the log shows which.
timed() {
	local start=${SECONDS} status=0

	"$@" || status=$?
	echo "  ($((SECONDS - start)) s)"
	return ${status}
}

# The count named $2 in the join's summary in file $1.
summary() {
	awk -v name="$2" '$0 ~ "^ *" name ":" { print $NF }' "$1"
}

# Runs perf "$@" but its first argument, the file for its output ($1.err
# for its errors), and leaves its exit status in perf_status. A crash (a
# signal, a sanitizer report) fails, whatever the status: returns 1 then.
perf_status=0
perf_run_any() {
	local out=$1

	shift
	perf_status=0
	perf "$@" >"${out}" 2>"${out}.err" || perf_status=$?
	# killed by a signal: SIGABRT, SIGBUS, SIGFPE, SIGSEGV
	if [ "${perf_status}" -eq 134 ] || [ "${perf_status}" -eq 135 ] ||
		[ "${perf_status}" -eq 136 ] || [ "${perf_status}" -eq 139 ] ||
		grep -qE "Segmentation|SUMMARY: .*Sanitizer|runtime error" "${out}.err"; then
		fail "perf $*: crashed (exit status ${perf_status})"
		grep -E "Segmentation|Sanitizer|runtime error" "${out}.err" | head -n 3
		return 1
	fi
	return 0
}

# The same, and perf must succeed: an error fails too, with the end of
# its errors.
perf_run() {
	local out=$1

	perf_run_any "$@" || return 1
	if [ "${perf_status}" -ne 0 ]; then
		shift
		fail "perf $*: exit status ${perf_status}"
		tail -n 5 "${out}.err"
		return 1
	fi
	return 0
}
