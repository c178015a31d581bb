#!/bin/bash
# Deferred callchains: recordings of Linux 6.19 and later read the same
# SPDX-License-Identifier: GPL-2.0
#
# No kernel needed: 'perf test -w deferredstream views' writes a stream of
# every kind of deferred sample in this kernel's format, 'views-mainline'
# the same events as Linux 6.19 writes them (attr.defer_callchain, the
# cookie at the end of the sample's callchain after its marker, the record's
# stack after PERF_CONTEXT_USER). Every view must show the same: the same
# joined stacks, marks and summary, as a pipe and as a file, unjoined with
# --no-merge-callchains, and after perf inject --merge-callchains.

set -e

deferred_test=deferred_mainline
# shellcheck source=lib/deferred_callchain.sh
. "$(dirname "$0")"/lib/deferred_callchain.sh

# The user frames are in perf itself, at addresses that differ per run.
normalize() {
	sed -E 's/^([[:space:]]+)[0-9a-f]+ (deferredstream_)/\1\2/'
}

# perf "$@" on $input, output normalized into $out; a failure fails.
view() {
	local out=$1 input=$2 status=0

	shift 2
	if [ "${input%.pipe}" != "${input}" ]; then
		perf "$@" -i - <"${input}" >"${out}.raw" 2>"${out}.err" || status=$?
	else
		perf "$@" -i "${input}" >"${out}.raw" 2>"${out}.err" || status=$?
	fi
	normalize <"${out}.raw" >"${out}"
	if [ "${status}" -ne 0 ]; then
		fail "perf $* -i ${input##*/} exited ${status}"
		tail -n 5 "${out}.err"
		return 1
	fi
	return 0
}

# The same view of both formats, compared; $1 names it.
compare() {
	local name=$1 ext=$2

	shift 2
	view "${tmpdir}/this.out" "${tmpdir}/this.${ext}" "$@" || return 0
	view "${tmpdir}/mainline.out" "${tmpdir}/mainline.${ext}" "$@" || return 0
	if ! cmp -s "${tmpdir}/this.out" "${tmpdir}/mainline.out"; then
		fail "${name}: Linux 6.19's recording shows otherwise"
		diff "${tmpdir}/this.out" "${tmpdir}/mainline.out" | head -n 10
	fi
	# the summary on stderr too, where there is one
	if ! cmp -s <(grep -E '^ +[a-z ]+: +[0-9]+$' "${tmpdir}/this.out.err") \
		<(grep -E '^ +[a-z ]+: +[0-9]+$' "${tmpdir}/mainline.out.err"); then
		fail "${name}: the join's summary differs"
	fi
	return 0
}

perf test -w deferredstream views >"${tmpdir}/this.pipe"
perf test -w deferredstream views-mainline >"${tmpdir}/mainline.pipe"
for format in this mainline; do
	perf inject -i - -o "${tmpdir}/${format}.data" <"${tmpdir}/${format}.pipe"
done

# The format is told by the attrs: perf evlist shows 6.19's bits.
perf evlist -v -i "${tmpdir}/mainline.data" >"${tmpdir}/evlist"
grep -q "defer_callchain: 1" "${tmpdir}/evlist" ||
	fail "perf evlist -v: no defer_callchain in Linux 6.19's attr"
grep -q "CALLCHAIN_DEFERRED" "${tmpdir}/evlist" &&
	fail "perf evlist -v: Linux 6.19's attr has this kernel's sample bit"

for ext in pipe data; do
	echo "Linux 6.19's format, read as a ${ext}"
	compare "perf script" "${ext}" script
	# joined for real: a user frame from a record, the marks, the summary
	grep -q "deferredstream_leaf" "${tmpdir}/mainline.out" ||
		fail "perf script: no joined user frame in Linux 6.19's recording"
	grep -qF "[user stack unresolved]" "${tmpdir}/mainline.out" ||
		fail "perf script: no unresolved mark in Linux 6.19's recording"
	[ "$(summary "${tmpdir}/mainline.out.err" joined)" = 5 ] ||
		fail "perf script: not 5 joined samples in Linux 6.19's recording"
	compare "perf script -F +srcline" "${ext}" script -F +srcline
	compare "perf script --no-merge-callchains" "${ext}" script --no-merge-callchains
	# unjoined, a 6.19 sample shows its kernel part: its cookie is no frame
	grep -qE "^[[:space:]]+100000001 " "${tmpdir}/mainline.out" &&
		fail "perf script --no-merge-callchains: a cookie shown as a frame"
	compare "perf report" "${ext}" report --stdio
	compare "perf report --no-children --sort dso,sym" "${ext}" report --stdio \
		--no-children --sort dso,sym
	compare "perf report --stats" "${ext}" report --stats
done

echo "perf inject --merge-callchains"
for format in this mainline; do
	perf inject --merge-callchains -i "${tmpdir}/${format}.data" \
		-o "${tmpdir}/${format}.merged"
done
compare "perf script of the merged file" merged script
perf evlist -v -i "${tmpdir}/mainline.merged" >"${tmpdir}/evlist"
grep -qE "defer_(callchain|output)" "${tmpdir}/evlist" &&
	fail "perf inject --merge-callchains: Linux 6.19's bits left in the attr"

cleanup
exit ${err}
