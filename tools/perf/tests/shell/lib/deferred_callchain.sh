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
