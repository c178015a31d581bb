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
# file (by perf inject, and by the workload in the other byte order),
# through the file's index. Every sample's stack and mark and the summary
# must be the same every way, and what the rules say they are.
#
# And a file never waits: its index holds records only, and only those
# between the samples being read and their records. A thread's sample
# whose record comes after 2,000 stays of another thread goes over a
# 512 KiB cap in a pipe's queue, which holds every event behind it, but is
# joined from a file, byte-swapped, compressed (as perf record -z writes
# it), with AUX area data or none of those, or from a directory (as perf
# record --threads writes it, each thread's events in a file, no round
# ends, compressed or not); and the index of a recording of 200,000 samples (50,000 records)
# never holds more than a few of them.

set -e

deferred_test=deferred_rules
# shellcheck source=lib/deferred_callchain.sh
. "$(dirname "$0")"/lib/deferred_callchain.sh

perf test -w deferredstream rules >"${tmpdir}/rules.pipe"
perf inject -i - -o "${tmpdir}/rules.data" <"${tmpdir}/rules.pipe"
perf test -w deferredstream rules swapped-file >"${tmpdir}/swapped.data"
files="rules.data swapped.data"

# The join's summary lines of file $1
summary_lines() {
	grep -E '^ +[a-z ]+: +[0-9]+$' "$1" || true
}

# perf "$@" on input $2 (a .pipe read from stdin, or a file) into
# ${tmpdir}/$1.out and .err; a failure fails.
read_as() {
	local name=$1 input=$2 status=0

	shift 2
	if [ "${input%.pipe}" != "${input}" ]; then
		perf "$@" -i - <"${tmpdir}/${input}" >"${tmpdir}/${name}.out" \
			2>"${tmpdir}/${name}.err" || status=$?
	else
		perf "$@" -i "${tmpdir}/${input}" >"${tmpdir}/${name}.out" \
			2>"${tmpdir}/${name}.err" || status=$?
	fi
	[ "${status}" -eq 0 ] && return 0
	fail "perf $* -i ${input} exited ${status}"
	tail -n 5 "${tmpdir}/${name}.err"
	return 1
}

# perf "$@" on the pipe and on each file: the outputs (all of them, or the
# join's summary in them: $2) and the summaries on stderr compared.
both_ways() {
	local name=$1 what=$2 file

	shift 2
	read_as pipe rules.pipe "$@" || return 0
	if [ "${what}" = summary ]; then
		summary_lines "${tmpdir}/pipe.out" >"${tmpdir}/pipe.want"
	else
		cp "${tmpdir}/pipe.out" "${tmpdir}/pipe.want"
	fi
	for file in ${files}; do
		read_as file "${file}" "$@" || continue
		if [ "${what}" = summary ]; then
			summary_lines "${tmpdir}/file.out" >"${tmpdir}/file.got"
			[ -s "${tmpdir}/file.got" ] || fail "${name}: no summary of ${file}"
		else
			cp "${tmpdir}/file.out" "${tmpdir}/file.got"
		fi
		if ! cmp -s "${tmpdir}/pipe.want" "${tmpdir}/file.got"; then
			fail "${name}: ${file} and the pipe differ"
			diff "${tmpdir}/pipe.want" "${tmpdir}/file.got" | head -n 20
		fi
		if ! cmp -s <(summary_lines "${tmpdir}/pipe.err") \
			<(summary_lines "${tmpdir}/file.err"); then
			fail "${name}: the summaries of ${file} and the pipe differ"
			diff "${tmpdir}/pipe.err" "${tmpdir}/file.err" | head -n 20
		fi
	done
	return 0
}

echo "perf script"
both_ways "perf script" all script
# what the rules say, from the summary every way agreed on
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
# A pipe's report is laid out before its attrs come: flat every way.
echo "perf report"
both_ways "perf report" all report --stdio --no-children -g none
both_ways "perf report --stats" summary report --stats

# A sample waiting behind another thread's 2,000 stays: over the cap in a
# pipe, joined from a file.
echo "perf script --defer-queue-size 512k: off-CPU"
perf test -w deferredstream offcpu 2000 >"${tmpdir}/offcpu.pipe"
perf test -w deferredstream offcpu 2000 file >"${tmpdir}/offcpu.data"
perf test -w deferredstream offcpu 2000 swapped-file >"${tmpdir}/offcpu-swapped.data"
perf test -w deferredstream offcpu 2000 compressed-file >"${tmpdir}/offcpu-compressed.data"
# AUX area data that look like a record for the waiting sample's thread:
# the index skips them as the reader does (perf script --no-itrace)
perf test -w deferredstream offcpu 2000 aux-file >"${tmpdir}/offcpu-aux.data"
# tracing data in the data section, as perf inject once wrote them, and
# AUX area data: the index steps over both payloads as the reader does
perf test -w deferredstream offcpu 2000 tracing-file >"${tmpdir}/offcpu-tracing.data"
perf test -w deferredstream offcpu 2000 dir "${tmpdir}/offcpu.dir"
perf test -w deferredstream offcpu 2000 compressed-dir "${tmpdir}/offcpu-compressed.dir"
for input in offcpu.pipe offcpu.data offcpu-swapped.data offcpu-compressed.data \
	offcpu-aux.data offcpu-tracing.data offcpu.dir offcpu-compressed.dir; do
	read_as capped "${input}" script --no-itrace --defer-queue-size 512k || continue
	got="$(summary "${tmpdir}/capped.err" "over memory cap")"
	got="${got:-none} over the cap, $(summary "${tmpdir}/capped.err" joined) joined"
	case ${input} in
	*.pipe)
		# the queue: the sample goes out when the events behind it fill the cap
		want="1 over the cap, 20000 joined"
		;;
	*)
		want="0 over the cap, 20001 joined"
		;;
	esac
	[ "${got}" = "${want}" ] || fail "${input}: ${got}, expected ${want}"
	# the cap, when it cut in, is explained
	warned=$(grep -c "waited for their deferred callchain past" "${tmpdir}/capped.err" || true)
	[ "${warned}" = "${want%% *}" ] ||
		fail "${input}: ${warned} warnings of samples past the cap, expected ${want%% *}"
done

# A directory's index takes all its records at once: under a cap too small
# for them, perf says so and joins through the queue, as a pipe.
echo "perf script --defer-queue-size 64k: a directory over the cap"
if read_as dircap offcpu.dir script --defer-queue-size 64k; then
	got="$(summary "${tmpdir}/dircap.err" "over memory cap") over the cap,"
	got="${got} $(summary "${tmpdir}/dircap.err" joined) joined"
	[ "${got}" = "1 over the cap, 20000 joined" ] ||
		fail "offcpu.dir, 64k: ${got}, expected 1 over the cap, 20000 joined"
	grep -q "The directory's deferred callchains need more than --defer-queue-size" \
		"${tmpdir}/dircap.err" || fail "offcpu.dir, 64k: no word of the queue"
fi

# The index reads the data ahead of the reader, with its own walk: over a
# whole file both count the same records, AUX area data, compressed events
# and the other byte order included.
echo "perf script -v: the index walks the data as the reader does"
for input in offcpu.data offcpu-swapped.data offcpu-compressed.data offcpu-aux.data \
	offcpu-tracing.data offcpu.dir offcpu-compressed.dir; do
	read_as agree "${input}" script -v --no-itrace || continue
	# "deferred callchains: N records indexed, M read"
	got=$(awk '/ records indexed, / { print $3 " " $6 }' "${tmpdir}/agree.err")
	if [ -z "${got}" ]; then
		fail "${input}: the index did not read the whole file"
	elif [ "${got% *}" != "${got#* }" ] || [ "${got% *}" -eq 0 ]; then
		fail "${input}: ${got% *} records indexed, ${got#* } read"
	fi
done

# The index of a large file holds a window of it, not all its records.
echo "perf script -v: the index's memory"
perf test -w deferredstream bench 200000 defer >"${tmpdir}/bench.data"
if read_as large bench.data script -v; then
	got="$(summary "${tmpdir}/large.err" records) records,"
	got="${got} $(summary "${tmpdir}/large.err" joined) joined"
	[ "${got}" = "50008 records, 199992 joined" ] ||
		fail "bench.data: ${got}, expected 50008 records, 199992 joined"
	held=$(awk '/the index of records held at most/ { print $(NF - 1) }' \
		"${tmpdir}/large.err")
	# its 50,000 records are about 10 MB
	if [ -z "${held}" ] || [ "${held}" -gt $((1024 * 1024)) ]; then
		fail "bench.data: the index held ${held:-an unknown number of} bytes, over 1 MiB"
	fi
	echo "  the index held at most ${held} bytes"
fi

cleanup
exit ${err}
