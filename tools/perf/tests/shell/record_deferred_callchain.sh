#!/bin/bash
# perf record --call-graph fp,defer: deferred user callchains
# SPDX-License-Identifier: GPL-2.0
#
# Records the syscallchain workload (a known call chain that lives in a
# read system call) with fp and with fp,defer, and checks that the joined
# stacks hold the same user frames, that the join's summary adds up, that
# perf report -D, perf script --no-merge-callchains and perf inject show or
# keep the records, and that per-thread recordings sample time.

# shellcheck disable=SC2317 # the test functions are called through timed()
set -e

deferred_test=deferred
# shellcheck source=lib/deferred_callchain.sh
. "$(dirname "$0")"/lib/deferred_callchain.sh

chain="syscallchain_mid;syscallchain_top;syscallchain"

record() {
	perf record -q -e cpu-clock -c 1000000 --call-graph "$1" -o "$2" \
		-- perf test -w syscallchain 1
}

# The samples of recording $1, as perf script prints them with
# -F tid,time,period,ip,sym, in $1.script, and the join's summary in
# $1.summary. Every perf command takes seconds under emulation: the
# checks below share this one output.
script_samples() {
	perf script -i "$1" -F tid,time,period,ip,sym >"$1.script" 2>"$1.summary"
}

# One line per sample of $1.script that has the workload's chain: its
# kernel frame count, then its user frames from the innermost to the
# workload's function, then "read" if the sample was taken in the read
# system call.
user_stacks() {
	awk -v RS= '
	/syscallchain_top/ {
		n = split($0, lines, "\n"); kernel = 0; user = ""; in_read = ""
		for (i = 2; i <= n; i++) {
			if (split(lines[i], f, " ") < 2)
				continue
			if (f[1] ~ /^ffffffff/) {
				kernel++
				if (f[2] == "ksys_read")
					in_read = " read"
				continue
			}
			user = user (user == "" ? "" : ";") f[2]
			if (f[2] == "syscallchain")
				break
		}
		print kernel, user in_read
	}' "$1.script"
}

# Every sample of $1.script on one line: tid, time, period, addresses.
# Addresses, not symbols: a joined sample taken in execve before the new
# image's loader was mapped resolves with the maps of its record's time,
# but at its own time in a merged file.
sample_lines() {
	awk -v RS= '{
		n = split($0, lines, "\n"); line = lines[1]
		for (i = 2; i <= n; i++) {
			split(lines[i], f, " ")
			line = line " " f[1]
		}
		gsub(/[ \t]+/, " ", line)
		print line
	}' "$1.script" | sort
}

record fp,defer "${tmpdir}/defer.data"
if ! perf evlist -v -i "${tmpdir}/defer.data" | grep -q CALLCHAIN_DEFERRED; then
	echo "Skip: the kernel cannot defer user callchains"
	cleanup
	exit 2
fi
record fp "${tmpdir}/fp.data"
script_samples "${tmpdir}/defer.data"
script_samples "${tmpdir}/fp.data"
perf report --stats -i "${tmpdir}/defer.data" >"${tmpdir}/defer.stats" 2>/dev/null

test_same_user_frames() {
	echo "Joined stacks hold the same user frames as fp stacks"
	for mode in fp defer; do
		user_stacks "${tmpdir}/${mode}.data" >"${tmpdir}/${mode}.stacks"
		if ! grep -q "^[1-9][0-9]* .*${chain}\( read\)\?\$" "${tmpdir}/${mode}.stacks"; then
			echo "  ${mode}: no kernel-mode sample with the chain ${chain}"
			err=1
		fi
		# Every sample in read() that reaches the chain's top holds all
		# of it. (A sample in a prologue misses its caller, with fp as
		# with defer: one in user mode, or a page fault on the stack.)
		if grep -v "${chain} read\$" "${tmpdir}/${mode}.stacks" |
			grep -q "^[1-9].* read\$"; then
			echo "  ${mode}: broken stacks:"
			grep -v "${chain} read\$" "${tmpdir}/${mode}.stacks" |
				grep "^[1-9].* read\$" | sort | uniq -c | head -5
			err=1
		fi
		# The user frames of samples in read(), most frequent first (page
		# faults in user code come and go with the machine's load).
		awk '$1 > 0 && $3 == "read" { print $2 }' "${tmpdir}/${mode}.stacks" |
			sort | uniq -c | sort -rn |
			awk 'NR == 1 { print $2 }' > "${tmpdir}/${mode}.top"
	done
	if [ ! -s "${tmpdir}/fp.top" ]; then
		echo "  no fp sample in read()"
		err=1
	elif ! cmp -s "${tmpdir}/fp.top" "${tmpdir}/defer.top"; then
		echo "  the usual user stack of a kernel-mode sample differs:"
		echo "    fp:    $(cat "${tmpdir}/fp.top")"
		echo "    defer: $(cat "${tmpdir}/defer.top")"
		err=1
	fi
}

test_summary() {
	local sum="${tmpdir}/defer.data.summary"

	echo "The join's summary adds up"
	deferred=$(summary "${sum}" "deferred samples")
	joined=$(summary "${sum}" "joined")
	unresolved=$(summary "${sum}" "unresolved samples")
	records=$(summary "${sum}" "records")
	orphans=$(summary "${sum}" "orphan records")
	lost=$(summary "${sum}" "lost records")
	if [ -z "${deferred}" ] || [ "${deferred}" -eq 0 ]; then
		echo "  no deferred samples in the summary:"
		cat "${sum}"
		err=1
		return
	fi
	if [ $((joined + unresolved)) -ne "${deferred}" ]; then
		echo "  joined ${joined} + unresolved ${unresolved} != deferred ${deferred}"
		err=1
	fi
	if [ "${records}" -eq 0 ] || [ "${orphans}" -gt "${records}" ]; then
		echo "  records ${records}, orphans ${orphans}"
		err=1
	fi
	if [ "${lost}" -eq 0 ] && [ "${unresolved}" -ne 0 ]; then
		echo "  ${unresolved} unresolved samples although nothing was lost"
		err=1
	fi
	stats=$(cat "${tmpdir}/defer.stats")
	if [ "$(echo "${stats}" | summary /dev/stdin "deferred samples")" != "${deferred}" ] ||
		[ "$(echo "${stats}" | summary /dev/stdin "unresolved samples")" != \
			"${unresolved}" ]; then
		echo "  perf report --stats disagrees with perf script:"
		echo "${stats}" | grep -A9 "deferred callchains:"
		err=1
	fi
}

test_report_dump() {
	echo "perf report -D shows the records and the cookies"
	perf report -D -i "${tmpdir}/defer.data" > "${tmpdir}/dump" 2>/dev/null
	dumped=$(grep -c "PERF_RECORD_CALLCHAIN_DEFERRED cookie: 0x" "${tmpdir}/dump" || true)
	counted=$(awk '/^ *CALLCHAIN_DEFERRED events:/ { print $3; exit }' "${tmpdir}/defer.stats")
	if [ "${dumped}" -eq 0 ] || [ "${dumped}" != "${counted}" ]; then
		echo "  ${dumped} records dumped, ${counted} counted"
		err=1
	fi
	if ! grep -q "deferred callchain cookie: 0x[1-9a-f]" "${tmpdir}/dump"; then
		echo "  no sample shows its cookie"
		err=1
	fi
}

test_no_merge() {
	echo "perf script --no-merge-callchains shows samples and records apart"
	perf script --no-merge-callchains -i "${tmpdir}/defer.data" -F comm,tid,event,ip,sym \
		> "${tmpdir}/raw" 2>&1
	if ! grep -q "deferred cookie: 0x" "${tmpdir}/raw" ||
		! grep -q "PERF_RECORD_CALLCHAIN_DEFERRED cookie: 0x" "${tmpdir}/raw"; then
		echo "  raw view lacks cookies or records"
		err=1
	fi
	if grep -q "deferred callchains:" "${tmpdir}/raw"; then
		echo "  raw view printed a join summary"
		err=1
	fi
}

test_inject() {
	echo "perf inject keeps the records, or writes joined fp samples"
	perf inject -i "${tmpdir}/defer.data" -o "${tmpdir}/kept.data"
	before=$(awk '/^ *CALLCHAIN_DEFERRED events:/ { print $3; exit }' "${tmpdir}/defer.stats")
	after=$(perf report --stats -i "${tmpdir}/kept.data" 2>/dev/null |
		awk '/^ *CALLCHAIN_DEFERRED events:/ { print $3; exit }')
	if [ "${before}" != "${after}" ]; then
		echo "  perf inject kept ${after} of ${before} records"
		err=1
	fi

	perf inject --merge-callchains -i "${tmpdir}/defer.data" -o "${tmpdir}/merged.data"
	if perf evlist -v -i "${tmpdir}/merged.data" | grep -q CALLCHAIN_DEFERRED; then
		echo "  merged file still asks for deferred callchains"
		err=1
	fi
	script_samples "${tmpdir}/merged.data"
	# Joined samples come out when their record is read; the merged file
	# is read in time order: compare the stacks, not their order.
	user_stacks "${tmpdir}/merged.data" | sort > "${tmpdir}/merged.stacks"
	sort "${tmpdir}/defer.stacks" > "${tmpdir}/defer.sorted"
	if ! cmp -s "${tmpdir}/defer.sorted" "${tmpdir}/merged.stacks"; then
		echo "  merged file's stacks differ from the joined ones"
		err=1
	fi
	# Everything else of every sample is kept too.
	for data in defer merged; do
		sample_lines "${tmpdir}/${data}.data" >"${tmpdir}/${data}.samples"
	done
	if [ "$(wc -l < "${tmpdir}/merged.samples")" -eq 0 ] ||
		! cmp -s "${tmpdir}/defer.samples" "${tmpdir}/merged.samples"; then
		echo "  merged file's samples differ from the joined ones:"
		diff "${tmpdir}/defer.samples" "${tmpdir}/merged.samples" | head -5
		err=1
	fi
}

test_pipe() {
	echo "Pipe mode: perf record -o - | perf script -i -"
	# perf script stops reading the pipe while it loads the symbols of
	# perf itself (seconds, under emulation, when they are not cached):
	# buffers large enough that perf record loses nothing meanwhile.
	perf record -q -m 16M -e cpu-clock -c 1000000 --call-graph fp,defer -o - \
		-- perf test -w syscallchain 1 2>/dev/null |
		perf script -i - -F ip,sym > "${tmpdir}/pipe.out" 2> "${tmpdir}/pipe.summary"
	deferred=$(summary "${tmpdir}/pipe.summary" "deferred samples")
	joined=$(summary "${tmpdir}/pipe.summary" "joined")
	if [ -z "${deferred}" ] || [ "${deferred}" -eq 0 ] || [ "${joined}" -eq 0 ]; then
		echo "  nothing deferred or joined through the pipe:"
		cat "${tmpdir}/pipe.summary"
		err=1
	fi
	if ! grep -q syscallchain_top "${tmpdir}/pipe.out"; then
		echo "  no joined user stack through the pipe; first samples, then the summary:"
		awk -v RS= 'NR <= 3' "${tmpdir}/pipe.out"
		cat "${tmpdir}/pipe.summary"
		err=1
	fi
}

# Every recording with fp,defer samples time, also one that leaves it out
# without defer (--per-thread, --no-inherit): the join orders the samples
# and records of every buffer by it. Their stacks are joined.
test_per_thread() {
	local opt data="${tmpdir}/per_thread.data"

	echo "Per-thread recordings sample time and are joined"
	for opt in --per-thread --no-inherit; do
		perf record -q -e cpu-clock -c 1000000 --call-graph fp,defer "${opt}" -o "${data}" \
			-- perf test -w syscallchain 1
		if ! perf evlist -v -i "${data}" |
			grep -q "sample_type: .*TIME.*CALLCHAIN_DEFERRED"; then
			echo "  ${opt}: no PERF_SAMPLE_TIME with deferred callchains:"
			perf evlist -v -i "${data}" | grep -o "sample_type: [^,]*"
			err=1
		fi
		perf script -i "${data}" -F ip,sym > "${tmpdir}/per_thread.out" \
			2> "${tmpdir}/per_thread.summary"
		deferred=$(summary "${tmpdir}/per_thread.summary" "deferred samples")
		unresolved=$(summary "${tmpdir}/per_thread.summary" "unresolved samples")
		lost=$(summary "${tmpdir}/per_thread.summary" "lost records")
		if [ "${deferred:-0}" -eq 0 ] ||
			! grep -q syscallchain_top "${tmpdir}/per_thread.out"; then
			echo "  ${opt}: no joined user stack:"
			cat "${tmpdir}/per_thread.summary"
			err=1
		elif [ "${lost}" -eq 0 ] && [ "${unresolved}" -ne 0 ]; then
			echo "  ${opt}: ${unresolved} unresolved samples although nothing was lost"
			err=1
		fi
	done
}

timed test_same_user_frames
timed test_summary
timed test_report_dump
timed test_no_merge
timed test_inject
timed test_pipe
timed test_per_thread

cleanup
exit $err
