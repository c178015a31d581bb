#!/bin/bash
# Deferred callchains: perf sched and scripts over tracepoint samples
# SPDX-License-Identifier: GPL-2.0
#
# No kernel needed: 'perf test -w deferredstream sched' writes sched_switch
# and sched_wakeup samples of three tasks on two CPUs, with the tracing data
# that describes them. Samples wait for records that come after other
# tasks' switches, one from the other CPU's buffer; one joins across a loss
# (ambiguous), one never gets its record (unresolved). 'sched-fp' writes
# the same events as plain fp recording has them. perf sched must read the
# deferred recording as it reads the fp one, scripts get the marks, and the
# raw view's filters apply to records too.

set -e

deferred_test=deferred_sched
# shellcheck source=lib/deferred_callchain.sh
. "$(dirname "$0")"/lib/deferred_callchain.sh

# Whether files $1 and $2 read the same, but for the lines matching $3
# (files, not process substitution: a guest may have no /dev/fd).
same_but() {
	grep -v -- "$3" "$1" >"$1.cmp" || true
	grep -v -- "$3" "$2" >"$2.cmp" || true
	diff "$1.cmp" "$2.cmp" >"$1.diff"
}


setup() {
	# perf sched reads files only: the workload writes one itself
	perf test -w deferredstream sched file >"${tmpdir}/sched.data"
	perf test -w deferredstream sched-fp file >"${tmpdir}/fp.data"
	perf test -w deferredstream sched >"${tmpdir}/sched.pipe"
	perf test -w deferredstream sched-fp >"${tmpdir}/fp.pipe"
}

# Each task's wakeup-to-run delays, as the switches say (in ms, from 1 s):
# A woken at 12, runs at 15; B runs at 10, preempted at 15, runs at 20 on
# the other CPU; C woken at 30, runs at 32. A switch joined late comes
# after a later one of its CPU: perf sched fails, "delta < 0".
test_latency() {
	local out="${tmpdir}/latency" expected got

	perf_run "${out}" sched latency -i "${tmpdir}/sched.data" || return 0
	perf_run "${out}.fp" sched latency -i "${tmpdir}/fp.data" || return 0
	if grep -qE "delta: .* < 0|unordered timestamps" "${out}" "${out}.err"; then
		fail "perf sched latency: switches out of time order"
	fi
	# task, count, average and longest delay, when the longest began and ended
	expected="task-a:1001 1 3.000 3.000 1.012000 1.015000
task-b:1002 2 2.500 5.000 1.015000 1.020000
task-c:1003 1 2.000 2.000 1.030000 1.032000"
	got=$(tr -d '|' <"${out}" | awk '/^ *task-/ { print $1, $4, $6, $9, $13, $17 }')
	if [ "${got}" != "${expected}" ]; then
		fail "perf sched latency: expected, per task, count, delays, the longest's times:"
		echo "${expected}"
		echo "  got:"
		echo "${got}"
	fi
	if ! same_but "${out}" "${out}.fp" INFO; then
		fail "perf sched latency: the deferred recording reads unlike the fp one"
		head -n 5 "${out}.diff"
	fi
	return 0
}

# timehist: the same as of the fp recording, the marks aside; the marks on
# the ambiguous and the unresolved samples' lines.
test_timehist() {
	local out="${tmpdir}/timehist" times

	perf_run "${out}" sched timehist -i "${tmpdir}/sched.data" || return 0
	perf_run "${out}.fp" sched timehist -i "${tmpdir}/fp.data" ||
		return 0
	times=$(awk '$1 ~ /^[0-9]+\.[0-9]+$/ { print $1 }' "${out}")
	[ "$(echo "${times}" | wc -w)" -eq 6 ] ||
		fail "perf sched timehist: $(echo "${times}" | wc -w) lines," \
			"expected 5 switches and a loss"
	[ "${times}" = "$(sort -n <<<"${times}")" ] ||
		fail "perf sched timehist: out of time order: $(echo "${times}" | tr '\n' ' ')"
	grep -qE '^ +1\.015000 .*task-b.*<- \[user stack ambiguous\]$' "${out}" ||
		fail "perf sched timehist: B's switch at 1.015 does not end in" \
			"[user stack ambiguous]"
	grep -qE '^ +1\.025000 .*task-a.*<- \[user stack unresolved\]$' "${out}" ||
		fail "perf sched timehist: A's switch at 1.025 does not end in" \
			"[user stack unresolved]"
	sed 's/ <- \[user stack [a-z]*\]$//' "${out}" >"${out}.unmarked"
	if ! same_but "${out}.unmarked" "${out}.fp" "^$"; then
		fail "perf sched timehist: the deferred recording reads unlike the fp one"
		head -n 5 "${out}.unmarked.diff"
	fi
	return 0
}

test_map() {
	local out="${tmpdir}/map"

	perf_run "${out}" sched map -i "${tmpdir}/sched.data" || return 0
	perf_run "${out}.fp" sched map -i "${tmpdir}/fp.data" || return 0
	[ "$(grep -c 'secs' "${out}")" -eq 5 ] ||
		fail "perf sched map: $(grep -c 'secs' "${out}") switches, expected 5"
	if ! same_but "${out}" "${out}.fp" INFO; then
		fail "perf sched map: the deferred recording reads unlike the fp one"
		head -n 5 "${out}.diff"
	fi
	# --color-pids marks a thread in the runtime data map mode keeps for
	# every thread: it once stored the mark in the same private pointer,
	# and perf sched map took it for that data (SIGSEGV).
	perf_run "${out}.color" \
		sched map --color-pids 1002 -i "${tmpdir}/sched.data" || return 0
	[ "$(grep -c 'secs' "${out}.color")" -eq 5 ] ||
		fail "perf sched map --color-pids: $(grep -c 'secs' "${out}.color") switches," \
			"expected 5"
	return 0
}

# A perl script's handler gets each switch's callchain, joined, the marks
# as its outermost frames; from the file's index and the pipe's queue.
test_perl() {
	local input out="${tmpdir}/perl" expected got chain

	if ! perf version --build-options | grep -qE "libperl: +\[ on  \]"; then
		fail "perf was built without perl scripting"
		return 0
	fi
	cat >"${tmpdir}/frames.pl" <<'EOF'
sub sched::sched_switch
{
	my ($event_name, $context, $cpu, $secs, $nsecs, $pid, $comm, $callchain) = @_;
	my @frames = map { $_->{sym} ? $_->{sym}{name} : "?" } @$callchain;

	printf("%d.%09d %s %s\n", $secs, $nsecs, $comm, join(";", @frames));
}
EOF
	chain="deferredstream_leaf;deferredstream_mid;deferredstream_top"
	expected="1.010000000 task-a ?;?;${chain}
1.015000000 task-b ?;${chain};[user stack ambiguous]
1.020000000 task-c ?;?;deferredstream_mid;deferredstream_top
1.025000000 task-a ?;?;[user stack unresolved]
1.032000000 swapper ?"
	for input in sched.data sched.pipe; do
		if [ "${input}" = sched.pipe ]; then
			perf_run "${out}" script -s "${tmpdir}/frames.pl" -i - \
				<"${tmpdir}/${input}" || continue
		else
			perf_run "${out}" script -s "${tmpdir}/frames.pl" \
				-i "${tmpdir}/${input}" || continue
		fi
		got=$(grep -E '^[0-9]+\.[0-9]+ ' "${out}")
		if [ "${got}" != "${expected}" ]; then
			fail "perl (${input}): expected the switches' frames:"
			echo "${expected}"
			echo "  got:"
			echo "${got}"
		fi
	done
	return 0
}

# perf script --no-merge-callchains: records go through --cpu and --time
# as samples do. Records: C's at 13 on CPU 1, A's at 16 on 0, B's at 21 on
# 1, C's at 33 on 0.
test_raw_filters() {
	local out="${tmpdir}/raw" args expected got

	for args in ":0x100000002 0x100000001 0x300000001 0x300000002" \
		"--cpu 1:0x100000002 0x300000001" \
		"--time 1.015,1.030:0x100000001 0x300000001" \
		"--cpu 1 --time 1.015,1.030:0x300000001"; do
		expected=${args#*:}
		args=${args%%:*}
		# shellcheck disable=SC2086 # the arguments split on purpose
		perf_run "${out}" script \
			--no-merge-callchains ${args} -F tid,cpu,time,event \
			-i "${tmpdir}/sched.data" || continue
		got=$(awk '/PERF_RECORD_CALLCHAIN_DEFERRED/ { print $(NF - 2) }' "${out}" | xargs)
		[ "${got}" = "${expected}" ] ||
			fail "perf script --no-merge-callchains ${args}: records ${got:-none}," \
				"expected ${expected}"
	done
	return 0
}

# perf report --stats of a pipe with tracing data counts every event after
# it (the tracing data follows its event in a pipe: unread, it was taken
# for events, "unexpected end of event stream"); it orders them, for the
# join's counts, only where an event defers callchains.
test_stats() {
	local out="${tmpdir}/stats" queued

	if perf_run "${out}" report --stats \
		-i - <"${tmpdir}/sched.pipe"; then
		grep -qE "^ +SAMPLE events: +7 " "${out}" ||
			fail "perf report --stats (pipe): not 7 samples after the tracing data"
		[ "$(summary "${out}" joined)" = 4 ] ||
			fail "perf report --stats (pipe): not 4 joined samples"
	fi
	perf_run "${out}" --debug ordered-events=1 report --stats \
		-i - <"${tmpdir}/fp.pipe" || return 0
	queued=$(grep -c "nr_events [1-9]" "${out}.err" || true)
	[ "${queued}" -eq 0 ] ||
		fail "perf report --stats orders the events of a pipe that defers nothing"
	perf_run "${out}" --debug ordered-events=1 report --stats \
		-i - <"${tmpdir}/sched.pipe" || return 0
	queued=$(grep -c "nr_events [1-9]" "${out}.err" || true)
	[ "${queued}" -gt 0 ] ||
		fail "perf report --stats does not order the events of a pipe that defers"
	return 0
}

setup
test_stats
test_latency
test_timehist
test_map
test_perl
test_raw_filters

cleanup
exit ${err}
