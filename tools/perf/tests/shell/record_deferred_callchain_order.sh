#!/bin/bash
# perf record --call-graph fp,defer: lossy recordings, time order, perf sched
# SPDX-License-Identifier: GPL-2.0
#
# What users run on real recordings: a recording with lost records read by
# the default perf report and perf script (no crash, the marks shown, the
# summary adds up); samples of many threads in time order; perf sched and
# perf kwork over deferred tracepoint samples; the walk's own tracepoint.

# shellcheck disable=SC2317 # the test functions are called through timed()
set -e

deferred_test=deferred_order
# shellcheck source=lib/deferred_callchain.sh
. "$(dirname "$0")"/lib/deferred_callchain.sh



# A one-page buffer and a short period: events get lost. The default views
# read it whole; the marks show the samples whose record was lost or came
# after a loss. Which events a loss takes is up to the kernel and perf's
# pace: the record of a stay may be written before the loss is (the
# kernel writes PERF_RECORD_LOST when there is room again), so a lossy
# recording need not mark any sample. The workload is most likely in the
# middle of a long system call when recording stops, and the record of
# that kernel stay then never comes; not certainly: should the call end
# between the workload's end and perf's last read of the buffer, the
# kernel still writes the record to the disabled event that sampled the
# stay. So the workload reads 64 MiB at a time, perf record follows it
# for a second, and the test records again, with a shorter period, until
# a recording has both a loss and an unresolved sample.
test_lossy() {
	local data="${tmpdir}/lossy.data" lost=0 unresolved=0 period deferred joined ambiguous
	local reader

	echo "A lossy recording through the default perf report and perf script"
	dd if=/dev/zero of=/dev/null bs=64M count=1000000 2>/dev/null &
	reader=$!
	for period in 20000 10000 5000 2500 2500 2500; do
		perf record -q -m 1 -e cpu-clock -c "${period}" --call-graph fp,defer \
			-o "${data}" -p "${reader}" -- sleep 1 2>/dev/null || true
		if ! perf evlist -v -i "${data}" | grep -q CALLCHAIN_DEFERRED; then
			kill "${reader}"
			echo "Skip: the kernel cannot defer user callchains"
			cleanup
			exit 2
		fi
		perf script -i "${data}" >/dev/null 2>"${tmpdir}/lossy.summary" || true
		lost=$(summary "${tmpdir}/lossy.summary" "lost records")
		unresolved=$(summary "${tmpdir}/lossy.summary" "unresolved samples")
		[ "${lost:-0}" -gt 0 ] && [ "${unresolved:-0}" -gt 0 ] && break
	done
	kill "${reader}"
	wait "${reader}" 2>/dev/null || true
	if [ "${lost:-0}" -eq 0 ]; then
		fail "nothing was lost with a one-page buffer"
		return
	fi
	if [ "${unresolved:-0}" -eq 0 ]; then
		fail "no sample unresolved in six lossy recordings"
		return
	fi
	perf_run "${tmpdir}/lossy.report" report --stdio -i "${data}" || true
	perf_run "${tmpdir}/lossy.report" report --stdio --no-children -G -i "${data}" || true
	if perf_run "${tmpdir}/lossy.script" script -i "${data}"; then
		deferred=$(summary "${tmpdir}/lossy.script.err" "deferred samples")
		joined=$(summary "${tmpdir}/lossy.script.err" "joined")
		unresolved=$(summary "${tmpdir}/lossy.script.err" "unresolved samples")
		ambiguous=$(summary "${tmpdir}/lossy.script.err" "ambiguous joins")
		[ "$((joined + unresolved))" -eq "${deferred}" ] ||
			fail "joined ${joined} + unresolved ${unresolved} != deferred ${deferred}"
		# every unresolved or ambiguous sample shows its mark
		[ "$(grep -c '\[user stack unresolved\]' "${tmpdir}/lossy.script")" -eq \
			"${unresolved}" ] || fail "not ${unresolved} unresolved marks"
		[ "$(grep -c '\[user stack ambiguous\]' "${tmpdir}/lossy.script")" -eq \
			"${ambiguous}" ] || fail "not ${ambiguous} ambiguous marks"
		echo "  ${lost} lost: ${deferred} deferred, ${unresolved} unresolved," \
			"${ambiguous} ambiguous"
	fi
	# Other fields (srcline, slow under emulation, has the views test on
	# the host)
	perf_run "${tmpdir}/lossy.script" script -F +symoff -i "${data}" || true
}

# Samples of many threads, each of them joined when its record comes: every
# tool still gets them in time order. perf's own sort cannot place an event
# written to its buffer after a later round was flushed (a vCPU the host
# stopped mid-write does that under TCG); it counts them ("N out of order
# events recorded"). Each such event starts at most one inversion in the
# output: any more came from the join.
test_time_order() {
	local data="${tmpdir}/threads.data" inversions late

	echo "Samples of many threads in time order"
	perf record -q -e cpu-clock -F 2000 --call-graph fp,defer -o "${data}" \
		-- perf bench sched messaging -t -g 1 -l 50 >/dev/null 2>&1 || true
	perf_run "${tmpdir}/threads.out" script -F tid,time --ns -i "${data}" || return
	if [ "$(wc -l <"${tmpdir}/threads.out")" -lt 100 ]; then
		fail "only $(wc -l <"${tmpdir}/threads.out") samples"
	fi
	# times as integers of ns: awk's doubles would round them
	inversions=$(awk '{ t = $2; sub(":", "", t); sub("\\.", "", t)
		if (NR > 1 && (length(t) < length(last) ||
			       (length(t) == length(last) && (t "") < (last "")))) {
			print "  " prev " -> " $0 >"/dev/stderr"; n++
		}
		last = t; prev = $0 } END { print n + 0 }' "${tmpdir}/threads.out")
	late=$(awk '/out of order events recorded/ { print $1 }' "${tmpdir}/threads.out.err")
	if [ "${inversions}" -gt "${late:-0}" ]; then
		fail "${inversions} samples out of time order, perf sorted ${late:-0} late"
	fi
	joined=$(summary "${tmpdir}/threads.out.err" "joined")
	[ "${joined:-0}" -gt 0 ] || fail "no sample joined"
	threads=$(awk '{ print $1 }' "${tmpdir}/threads.out" | sort -u | wc -l)
	[ "${threads}" -gt 4 ] || fail "samples of ${threads} threads only"
}

# perf sched and perf kwork read tracepoint samples in time order: from a
# file's index, and from the join's queue where the data is compressed.
test_sched() {
	local data="${tmpdir}/sched.data" cmd cmds times inversions late deferred compress=$1

	echo "perf sched and perf kwork over deferred tracepoint samples${compress:+, $compress}"
	# shellcheck disable=SC2086 # no argument if not compressed
	if ! perf record -q -a -e sched:sched_switch -e sched:sched_wakeup \
		-e sched:sched_wakeup_new -e sched:sched_migrate_task \
		-e irq:softirq_entry -e irq:softirq_exit -e irq:softirq_raise \
		--call-graph fp,defer ${compress} -o "${data}" \
		-- perf bench sched messaging -g 1 -l 20 >/dev/null 2>"${tmpdir}/sched.err"; then
		fail "perf record of sched and irq tracepoints"
		tail -n 3 "${tmpdir}/sched.err"
		return
	fi
	# the join's summary: the tracepoint samples were deferred
	perf script -F event -i "${data}" >/dev/null 2>"${tmpdir}/sched.summary" || true
	deferred=$(summary "${tmpdir}/sched.summary" "deferred samples")
	[ "${deferred:-0}" -gt 0 ] ||
		fail "tracepoint samples not deferred"
	# Compressed, the data reach the same views by another reader: one
	# view shows it.
	cmds=("sched latency" "sched map" "sched timehist" "kwork report"
		"kwork latency" "kwork timehist")
	[ -z "${compress}" ] || cmds=("sched timehist")
	for cmd in "${cmds[@]}"; do
		# shellcheck disable=SC2086 # the subcommand splits on purpose
		perf_run "${tmpdir}/sched.out" ${cmd} -i "${data}" || continue
		# perf sched gives up on a switch older than the last one
		if grep -q "delta: .* < 0" "${tmpdir}/sched.out" "${tmpdir}/sched.out.err"; then
			fail "perf ${cmd}: a negative delta"
		fi
		[ "${cmd}" = "sched timehist" ] || continue
		if [ "$(grep -c '<-' "${tmpdir}/sched.out")" -eq 0 ]; then
			fail "perf sched timehist shows no callchain"
		fi
		# As in test_time_order: each event perf itself sorted late
		# (TCG) may start one inversion; any more came from the join.
		times=$(awk '$1 ~ /^[0-9]+\.[0-9]+$/ { print $1 }' "${tmpdir}/sched.out")
		inversions=$(awk 'NR > 1 && $1 + 0 < last + 0 { n++ } { last = $1 }
			END { print n + 0 }' <<<"${times}")
		late=$(awk '/out of order events recorded/ { print $1 }' \
			"${tmpdir}/sched.out.err" | head -n 1)
		if [ -z "${times}" ] || [ "${inversions}" -gt "${late:-0}" ]; then
			fail "perf sched timehist: ${inversions} switches out of time order," \
				"perf sorted ${late:-0} late"
		fi
	done
}

# The walk's own tracepoint, sampled with deferred callchains: a sample taken
# in the walk belongs to the stay being walked and asks for no other walk.
# The workload finishes, and every walk wrote its one record.
test_walk_tracepoint() {
	local data="${tmpdir}/walk.data" walks records lost

	echo "The unwind:unwind_deferred_walk tracepoint sampled with fp,defer"
	if ! perf list tracepoint 2>/dev/null | grep -q "unwind:unwind_deferred_walk"; then
		fail "no unwind:unwind_deferred_walk tracepoint"
		return
	fi
	if ! timeout 300 perf record -q -e unwind:unwind_deferred_walk -e cpu-clock -c 100000 \
		--call-graph fp,defer -o "${data}" -- perf test -w syscallchain 1 \
		>/dev/null 2>"${tmpdir}/walk.err"; then
		fail "perf record of the walk tracepoint did not finish (livelock?)"
		tail -n 3 "${tmpdir}/walk.err"
		return
	fi
	perf_run "${tmpdir}/walk.out" script -F event -i "${data}" || return
	walks=$(grep -c "unwind_deferred_walk" "${tmpdir}/walk.out" || true)
	records=$(summary "${tmpdir}/walk.out.err" "records")
	lost=$(summary "${tmpdir}/walk.out.err" "lost records")
	[ "${walks}" -gt 0 ] || fail "no walk sampled"
	# A walk with no record: a second walk per stay, or a lost record.
	[ "${walks}" -le "$((${records:-0} + ${lost:-0}))" ] ||
		fail "${walks} walks but ${records:-0} records and ${lost:-0} lost"
	echo "  ${walks} walks, ${records:-0} records, ${lost:-0} lost"
}

timed test_lossy
timed test_time_order
timed test_sched ""
timed test_sched -z
timed test_walk_tracepoint

cleanup
exit ${err}
