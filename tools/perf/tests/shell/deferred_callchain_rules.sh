#!/bin/bash
# Deferred callchains: a file and a pipe of the same events, one answer
# SPDX-License-Identifier: GPL-2.0
#
# No kernel needed: 'perf test -w deferredstream rules' writes a stream
# with what sets two joins apart when one forgets a rule: duplicate
# records, a record whose CPU's clock is behind its sample's (written after
# it), an exit between a sample and its record, a newer record first,
# records of threads nobody sampled, a cookie that comes round again, and
# a loss. Read as a pipe, it goes through the join's queue; written to a
# file, through the file's index. Every sample's stack and mark and the
# summary must be the same both ways, and what the rules say they are.

set -e

deferred_test=deferred_rules
# shellcheck source=lib/deferred_callchain.sh
. "$(dirname "$0")"/lib/deferred_callchain.sh

perf test -w deferredstream rules >"${tmpdir}/rules.pipe"
perf inject -i - -o "${tmpdir}/rules.data" <"${tmpdir}/rules.pipe"

# The join's summary lines of file $1
summary_lines() {
	grep -E '^ +[a-z ]+: +[0-9]+$' "$1" || true
}

# perf "$@" on the pipe and on the file: the outputs (all of them, or the
# join's summary in them: $2) and the summaries on stderr compared.
both_ways() {
	local name=$1 what=$2

	shift 2
	if ! perf "$@" -i - <"${tmpdir}/rules.pipe" >"${tmpdir}/pipe.out" \
		2>"${tmpdir}/pipe.err"; then
		fail "${name}: reading the pipe failed"
		tail -n 5 "${tmpdir}/pipe.err"
		return 0
	fi
	if ! perf "$@" -i "${tmpdir}/rules.data" >"${tmpdir}/file.out" \
		2>"${tmpdir}/file.err"; then
		fail "${name}: reading the file failed"
		tail -n 5 "${tmpdir}/file.err"
		return 0
	fi
	if [ "${what}" = summary ]; then
		summary_lines "${tmpdir}/pipe.out" >"${tmpdir}/pipe.sum"
		summary_lines "${tmpdir}/file.out" >"${tmpdir}/file.sum"
		[ -s "${tmpdir}/file.sum" ] || fail "${name}: no summary"
		mv "${tmpdir}/pipe.sum" "${tmpdir}/pipe.out"
		mv "${tmpdir}/file.sum" "${tmpdir}/file.out"
	fi
	if ! cmp -s "${tmpdir}/pipe.out" "${tmpdir}/file.out"; then
		fail "${name}: the file and the pipe differ"
		diff "${tmpdir}/pipe.out" "${tmpdir}/file.out" | head -n 20
	fi
	if ! cmp -s <(summary_lines "${tmpdir}/pipe.err") \
		<(summary_lines "${tmpdir}/file.err"); then
		fail "${name}: the summaries differ"
		diff "${tmpdir}/pipe.err" "${tmpdir}/file.err" | head -n 20
	fi
	return 0
}

echo "perf script"
both_ways "perf script" all script
# what the rules say, from the summary both ways agreed on
for count in "deferred samples:7" "joined:5" "backward joins:3" \
	"ambiguous joins:2" "unresolved samples:2" "records:8" \
	"orphan records:3" "lost records:1"; do
	got=$(summary "${tmpdir}/file.err" "${count%:*}")
	[ "${got}" = "${count#*:}" ] ||
		fail "perf script: ${count%:*} ${got:-missing}, expected ${count#*:}"
done
# every sample once, with its mark where it has one
[ "$(grep -c 'user stack unresolved' "${tmpdir}/file.out")" -eq 2 ] ||
	fail "perf script: expected 2 unresolved marks"
[ "$(grep -c 'user stack ambiguous' "${tmpdir}/file.out")" -eq 2 ] ||
	fail "perf script: expected 2 ambiguous marks"

echo "perf script -F, unjoined"
both_ways "perf script -F" all script -F tid,time,ip,sym
both_ways "perf script --no-merge-callchains" all script --no-merge-callchains
# A pipe's report is laid out before its attrs come: flat both ways.
echo "perf report"
both_ways "perf report" all report --stdio --no-children -g none
both_ways "perf report --stats" summary report --stats

cleanup
exit ${err}
