#!/bin/bash
# Deferred callchains: every view of unresolved and ambiguous samples
# SPDX-License-Identifier: GPL-2.0
#
# No kernel needed: 'perf test -w deferredstream' writes a pipe stream with
# every kind of deferred sample (joined, backward, user mode, ambiguous,
# unresolved at exit and at the end), their user stacks in functions of
# perf itself. Every view reads it, as a pipe and as a file, and must not
# crash; the marks must show, stay apart and end their lines; samples come
# out in time order, or file order without time; a waiting sample costs a
# bounded amount of memory, within a cap; perf record's fallback to fp.

set -e

deferred_test=deferred_views
# shellcheck source=lib/deferred_callchain.sh
. "$(dirname "$0")"/lib/deferred_callchain.sh

unresolved="[user stack unresolved]"
ambiguous="[user stack ambiguous]"

# Runs one perf command on an input (a pipe stream if it ends in .pipe);
# a crash, a sanitizer report or an error fails.
view() {
	local out=$1 input=$2

	shift 2
	if [ "${input%.pipe}" != "${input}" ]; then
		perf_run "${out}" "$@" -i - <"${input}"
	else
		perf_run "${out}" "$@" -i "${input}"
	fi
}

# Both marks, each on its own, as many times as expected.
check_marks() {
	local name=$1 out=$2 nr_unresolved=$3 nr_ambiguous=$4 got

	got=$(grep -cF "${unresolved}" "${out}" || true)
	[ "${got}" -eq "${nr_unresolved}" ] ||
		fail "${name}: ${got} lines with ${unresolved}, expected ${nr_unresolved}"
	got=$(grep -cF "${ambiguous}" "${out}" || true)
	[ "${got}" -eq "${nr_ambiguous}" ] ||
		fail "${name}: ${got} lines with ${ambiguous}, expected ${nr_ambiguous}"
	if grep -F "${unresolved}" "${out}" | grep -qF "${ambiguous}"; then
		fail "${name}: the two marks merged into one line"
	fi
}

setup() {
	perf test -w deferredstream views >"${tmpdir}/views.pipe"
	# a file with a header, as perf record writes it
	perf inject -i - -o "${tmpdir}/views.data" <"${tmpdir}/views.pipe"
}

# perf report: default (children), -G, --no-children, sort keys, graph modes.
test_report() {
	local input=$1 out="${tmpdir}/report" args

	for args in "" "-G" "--no-children" "--no-children -G" "--sort dso,sym" \
		"--sort dso,sym --no-children" "-g caller" "-g folded" "--stats"; do
		# shellcheck disable=SC2086 # the arguments split on purpose
		view "${out}" "${input}" report --stdio ${args} || continue
		[ "${args}" = "--stats" ] && continue
		grep -qF "${unresolved}" "${out}" ||
			fail "perf report ${args}: no ${unresolved}"
		grep -qF "${ambiguous}" "${out}" ||
			fail "perf report ${args}: no ${ambiguous}"
	done
	# one dso each: sorted by dso the marks are two entries (children: a
	# pipe's report learns of callchains too late to accumulate them)
	if [ "${input%.pipe}" = "${input}" ] &&
		view "${out}" "${input}" \
			report --stdio --sort dso -g none; then
		check_marks "perf report --sort dso" "${out}" 1 1
	fi
	if view "${out}" "${input}" report --stats &&
		! grep -qE "unresolved samples: +2$" "${out}"; then
		fail "perf report --stats: no summary with 2 unresolved samples"
	fi
	return 0
}

# perf script: default fields, +srcline,+symoff, no callchain, raw view.
test_script() {
	local input=$1 out="${tmpdir}/script" times args

	if view "${out}" "${input}" script; then
		# one frame each: two unresolved samples, one ambiguous
		check_marks "perf script" "${out}" 2 1
		grep -q "deferredstream_leaf" "${out}" ||
			fail "perf script: no joined user frame"
		grep -qE "^ +deferred samples: +7$" "${out}.err" ||
			fail "perf script: no summary on stderr"
	fi
	view "${out}" "${input}" script \
		-F +srcline,+symoff &&
		# the frame, then its source line, unknown: the symbol and offset
		check_marks "perf script -F +srcline,+symoff" "${out}" 4 2
	# by addresses alone: the mark in the chain, by name, once (not a 0)
	if view "${out}" "${input}" script -F ip; then
		check_marks "perf script -F ip" "${out}" 2 1
		if grep -qE '^[[:space:]]+0$' "${out}"; then
			fail "perf script -F ip: a mark printed as address 0"
		fi
	fi
	# without a callchain the mark ends the sample's line
	if view "${out}" "${input}" script \
		-F comm,tid,time,event; then
		check_marks "perf script -F comm,tid,time,event" "${out}" 2 1
		[ "$(grep -cE '\[user stack (unresolved|ambiguous)\]$' "${out}")" -eq 3 ] ||
			fail "perf script -F comm,tid,time,event: a mark does not end its line"
	fi
	# time order, joined samples included
	if view "${out}" "${input}" script -F time --ns; then
		times=$(grep -oE '^ *[0-9]+\.[0-9]+:' "${out}" | tr -d ' :')
		[ "${times}" = "$(sort -n <<<"${times}")" ] ||
			fail "perf script: samples not in time order:" \
				"$(echo "${times}" | tr '\n' ' ')"
		[ "$(wc -l <<<"${times}")" -eq 8 ] || fail "perf script: not 8 samples"
	fi
	if view "${out}" "${input}" script \
		--no-merge-callchains &&
		[ "$(grep -c PERF_RECORD_CALLCHAIN_DEFERRED "${out}")" -ne 3 ]; then
		fail "perf script --no-merge-callchains: not 3 records"
	fi
	# records go through the samples' filters: one record is TID3's
	if view "${out}" "${input}" script \
		--no-merge-callchains --tid 1003 &&
		[ "$(grep -c PERF_RECORD_CALLCHAIN_DEFERRED "${out}")" -ne 1 ]; then
		fail "perf script --no-merge-callchains --tid 1003: not 1 record"
	fi
	# read as written, nothing is joined: perf says so
	for args in "script --show-round-events" "script --dump-unsorted-raw-trace" \
		"report -D --disable-order"; do
		# shellcheck disable=SC2086 # the arguments split on purpose
		if view "${out}" "${input}" ${args} &&
			! grep -q "deferred user callchains are not joined" "${out}.err"; then
			fail "perf ${args}: no word that stacks are not joined"
		fi
	done
	view "${out}" "${input}" report -D || true
	view "${out}" "${input}" annotate --stdio || true
	return 0
}

# Scripts: python receives the joined stack and the marks as frames.
test_scripting() {
	local input=$1 out="${tmpdir}/scripting"

	if ! perf version --build-options | grep -qE "libpython: +\[ on  \]"; then
		fail "perf was built without python scripting"
		return 0
	fi
	cat >"${tmpdir}/frames.py" <<'EOF'
def process_event(param_dict):
    frames = [f.get("sym", {}).get("name", "[unknown]") + "@" + f.get("dso", "[unknown]")
              for f in param_dict.get("callchain", [])]
    print(param_dict["sample"]["tid"], ";".join(frames))
EOF
	if view "${out}" "${input}" script -s "${tmpdir}/frames.py"; then
		grep -qF "deferredstream_leaf@" "${out}" ||
			fail "python: no joined user frame"
		grep -qF "${unresolved}@${unresolved}" "${out}" ||
			fail "python: no unresolved mark as a frame"
		grep -qF "deferredstream_top@$(command -v perf);${ambiguous}@${ambiguous}" \
			"${out}" || fail "python: the ambiguous mark is not the outermost frame"
	fi
	if perf version --build-options | grep -qE "libperl: +\[ on  \]"; then
		cat >"${tmpdir}/count.pl" <<'EOF'
my $n = 0;
sub process_event { $n++; }
sub trace_end { print "perl events: $n\n"; }
EOF
		if view "${out}" "${input}" script -s "${tmpdir}/count.pl" &&
			! grep -qx "perl events: 8" "${out}"; then
			fail "perl: not 8 events"
		fi
	else
		fail "perf was built without perl scripting"
	fi
	return 0
}

# Events without time (perf record --per-thread left it out before it
# sampled time for deferred callchains): joined in the order of the file,
# from a file's index as from a pipe's queue, as the same events with time.
test_no_time() {
	local input out="${tmpdir}/no_time"

	perf test -w deferredstream views-notime >"${tmpdir}/no_time.pipe"
	perf inject -i - -o "${tmpdir}/no_time.data" <"${tmpdir}/no_time.pipe"
	if perf evlist -v -i "${tmpdir}/no_time.data" | grep -q "sample_type: .*TIME"; then
		fail "views-notime: the events have PERF_SAMPLE_TIME"
	fi
	for input in data pipe; do
		view "${out}" "${tmpdir}/no_time.${input}" \
			script || continue
		view "${out}.timed" "${tmpdir}/views.${input}" script ||
			continue
		check_marks "perf script (no time, ${input})" "${out}" 2 1
		grep -q "deferredstream_leaf" "${out}" ||
			fail "perf script (no time, ${input}): no joined user frame"
		# files, not process substitution: a guest may have no /dev/fd
		grep -A10 "^deferred callchains:" "${out}.timed.err" >"${out}.timed.summary" || true
		grep -A10 "^deferred callchains:" "${out}.err" >"${out}.summary" || true
		if ! diff "${out}.timed.summary" "${out}.summary" >"${out}.diff"; then
			fail "perf script (no time, ${input}): joined unlike the same events" \
				"with time:"
			cat "${out}.diff"
		fi
	done
	return 0
}

# --defer-queue-size and call-graph.defer-queue-size: past the cap, the
# oldest waiting samples go out unresolved and are counted over it; a bad
# size is an error, followed by the usage of that option only.
test_queue_size() {
	local input="${tmpdir}/queue.pipe" out="${tmpdir}/queue" how capped joined unresolved

	perf test -w deferredstream wait 1000 >"${input}"
	printf '[call-graph]\n\tdefer-queue-size = 16k\n' >"${tmpdir}/queue.config"
	for how in option config; do
		if [ "${how}" = option ]; then
			view "${out}" "${input}" script \
				--defer-queue-size 16k || continue
		else
			PERF_CONFIG="${tmpdir}/queue.config" view \
				"${out}" "${input}" script || continue
		fi
		capped=$(summary "${out}.err" "over memory cap")
		joined=$(summary "${out}.err" "joined")
		unresolved=$(summary "${out}.err" "unresolved samples")
		if [ "${capped:-0}" -eq 0 ] || [ "${unresolved}" != "${capped}" ] ||
			[ "${joined:-0}" -eq 0 ] || [ $((joined + unresolved)) -ne 1000 ]; then
			fail "16k queue (${how}): expected the oldest of 1000 samples" \
				"over the cap, the rest joined; ${capped:-no} over the cap," \
				"${joined:-no} joined, ${unresolved:-no} unresolved"
		fi
	done
	if view "${out}" "${input}" script &&
		[ "$(summary "${out}.err" "over memory cap")" != 0 ]; then
		fail "the default queue: samples over the cap"
	fi
	for tool in script report inject; do
		if perf "${tool}" --defer-queue-size 16q -i - <"${input}" >/dev/null \
			2>"${out}.err"; then
			fail "perf ${tool} --defer-queue-size 16q: no error"
		elif ! head -n 1 "${out}.err" |
			grep -q "^Invalid deferred callchain queue size: '16q'" ||
			[ "$(grep -c '^ *-' "${out}.err")" -ne 1 ] ||
			! grep -q -- "--defer-queue-size <size>" "${out}.err"; then
			# the error, then the usage of this option alone
			fail "perf ${tool} --defer-queue-size 16q: not the error and its option:"
			head -n 8 "${out}.err"
		fi
	done
	printf '[call-graph]\n\tdefer-queue-size = 16q\n' >"${tmpdir}/queue.config"
	if PERF_CONFIG="${tmpdir}/queue.config" perf script -i - <"${input}" >/dev/null \
		2>"${out}.err"; then
		fail "call-graph.defer-queue-size = 16q: no error"
	elif ! grep -q "Invalid deferred callchain queue size: '16q'" "${out}.err"; then
		fail "call-graph.defer-queue-size = 16q: no word of the bad size"
	fi
	return 0
}

# perf inject keeps the records; --merge-callchains writes fp samples.
test_inject() {
	local out="${tmpdir}/inject" args

	if view "${out}" "${tmpdir}/views.data" inject -o "${tmpdir}/kept.data" &&
		view "${out}" "${tmpdir}/kept.data" report -D &&
		[ "$(grep -c 'PERF_RECORD_CALLCHAIN_DEFERRED cookie' "${out}")" -ne 3 ]; then
		fail "perf inject: the records were not kept"
	fi
	if view "${out}" "${tmpdir}/views.data" inject \
		--merge-callchains -o "${tmpdir}/merged.data" &&
		view "${out}" "${tmpdir}/merged.data" script; then
		grep -q "deferredstream_leaf" "${out}" || fail "merged: no joined user frame"
		# the marks, as frames of their own mappings
		check_marks "perf script (merged)" "${out}" 2 1
		grep -qF "(${unresolved})" "${out}" || fail "merged: no mark mapping"
		if perf evlist -v -i "${tmpdir}/merged.data" | grep -q CALLCHAIN_DEFERRED; then
			fail "merged: the events still ask for deferred callchains"
		fi
		view "${out}" "${tmpdir}/merged.data" report --stdio || true
	fi
	# the marks are the same frames in the merged file: every view the same.
	# perf report orders branches of equal weight by where their dsos are
	# in memory: its stacks are compared one per line (folded), sorted.
	for args in "script" "script -F ip,sym,dso" "report --stdio --no-children -g folded" \
		"report --stdio --sort dso,sym -g folded,0,caller"; do
		# shellcheck disable=SC2086 # the arguments split on purpose
		view "${out}.joined" "${tmpdir}/views.data" ${args} || continue
		# shellcheck disable=SC2086
		view "${out}.merged" "${tmpdir}/merged.data" ${args} ||
			continue
		# but for perf report's summary of the join, which has none left
		if [ "${args#report}" != "${args}" ]; then
			sort -o "${out}.joined" "${out}.joined"
			sort -o "${out}.merged" "${out}.merged"
		fi
		if ! cmp -s <(grep -vE '^# Deferred callchains:|^#$' "${out}.joined") \
			<(grep -vE '^# Deferred callchains:|^#$' "${out}.merged"); then
			fail "perf ${args}: the merged file shows otherwise"
			diff "${out}.joined" "${out}.merged" | head -n 10
		fi
	done
	return 0
}

# Peak memory, in KiB, of perf report reading a stream or a file.
peak_kb() {
	local script='import resource, subprocess, sys
subprocess.run(sys.argv[1:-1], stdin=open(sys.argv[-1]), stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)'

	if [ "${1%.pipe}" != "$1" ]; then
		python3 -c "${script}" perf report --stdio -i - "$1"
	else
		python3 -c "${script}" perf report --stdio -i "$1" /dev/null
	fi
}

# perf inject --merge-callchains keeps the input's rounds, whether the
# samples join from a file's index or wait in a pipe's queue for a record
# that comes last.
test_inject_rounds() {
	local input rounds samples

	perf test -w deferredstream wait 5000 >"${tmpdir}/rounds.pipe"
	perf inject -i - -o "${tmpdir}/rounds.data" <"${tmpdir}/rounds.pipe"
	for input in rounds.data rounds.pipe; do
		if ! view "${tmpdir}/inject" \
			"${tmpdir}/${input}" inject --merge-callchains \
			-o "${tmpdir}/merged_rounds.data"; then
			continue
		fi
		rounds=$(perf report --stats -i "${tmpdir}/merged_rounds.data" 2>/dev/null |
			awk '/FINISHED_ROUND events:/ { print $3 }')
		[ "${rounds}" = 5 ] ||
			fail "perf inject --merge-callchains (${input}):" \
				"${rounds:-no} rounds, not 5"
		samples=$(perf script -i "${tmpdir}/merged_rounds.data" -F tid 2>/dev/null | wc -l)
		[ "${samples}" = 5000 ] ||
			fail "perf inject --merge-callchains (${input}): not 5000 samples"
	done
	return 0
}

# On a kernel without the feature, perf record says so, once, and every
# event records fp. An event the kernel refuses for another reason (an
# aux-output event without an AUX area event to lead it) fails with that
# reason, on any kernel: the deferred callchains are not blamed.
test_fallback() {
	local data="${tmpdir}/fallback.data" out="${tmpdir}/fallback.err" said

	if ! perf record -e cpu-clock -c 100000 --call-graph fp,defer -o "${data}" \
		-- true >/dev/null 2>"${out}"; then
		fail "perf record --call-graph fp,defer of cpu-clock failed:"
		tail -n 3 "${out}"
		return 0
	fi
	if perf record -e cpu-clock/aux-output/ -c 100000 --call-graph fp,defer \
		-o "${data}" -- true >/dev/null 2>"${out}"; then
		fail "perf record opened an aux-output event without an AUX area event"
	else
		grep -q "aux_output" "${out}" ||
			fail "perf record of an aux-output event: no word of aux_output:"
		if grep -q "cannot defer" "${out}"; then
			fail "perf record of an aux-output event blames the deferred callchains:"
			cat "${out}"
		fi
	fi
	perf record -e cpu-clock -e task-clock -c 100000 --call-graph fp,defer -o "${data}" \
		-- true >/dev/null 2>"${out}"
	if perf evlist -v -i "${data}" | grep -q CALLCHAIN_DEFERRED; then
		# this kernel defers: nothing to fall back from
		[ "$(perf evlist -v -i "${data}" | grep -c CALLCHAIN_DEFERRED)" -eq 2 ] ||
			fail "perf record: not both events with deferred callchains"
		return 0
	fi
	said=$(grep -c "The kernel cannot defer user callchains: recording plain fp callchains" \
		"${out}" || true)
	[ "${said}" -eq 1 ] || fail "perf record fell back to fp with ${said} words, not 1"
	[ "$(perf evlist -v -i "${data}" | grep -c "sample_type: .*CALLCHAIN")" -eq 2 ] ||
		fail "perf record fell back without callchains on both events"
	return 0
}

# A waiting sample costs its event's bytes plus at most 128: the peak memory
# of 300k samples that wait, less that of the same samples joined at once.
# A pipe holds them in the join's queue (the stream has rounds, so the
# reader frees its own copies as it goes); a file is indexed first, and
# nothing waits: no cost per sample at all.
test_memory() {
	local nr=300000 sample_size=72 wait_kb joined_kb extra input

	perf test -w deferredstream wait "${nr}" >"${tmpdir}/wait.pipe"
	perf test -w deferredstream joined "${nr}" >"${tmpdir}/joined.pipe"
	perf inject -i - -o "${tmpdir}/wait.data" <"${tmpdir}/wait.pipe"
	perf inject -i - -o "${tmpdir}/joined.data" <"${tmpdir}/joined.pipe"
	for input in pipe data; do
		if ! wait_kb=$(peak_kb "${tmpdir}/wait.${input}") ||
			! joined_kb=$(peak_kb "${tmpdir}/joined.${input}"); then
			fail "perf report of ${nr} samples (${input})"
			continue
		fi
		extra=$(( (wait_kb - joined_kb) * 1024 / nr ))
		echo "${input}: ${nr} waiting samples: ${wait_kb} KiB peak, joined at once:" \
			"${joined_kb} KiB, ${extra} bytes more per waiting sample"
		if [ "${input}" = pipe ] && [ "${extra}" -gt $((sample_size + 128)) ]; then
			fail "a waiting sample costs ${extra} bytes, more than ${sample_size} + 128"
		fi
		if [ "${input}" = data ] && [ "${extra}" -gt 8 ]; then
			fail "a sample of an indexed file costs ${extra} bytes while it waits"
		fi
	done
	return 0
}

setup
for input in "${tmpdir}/views.data" "${tmpdir}/views.pipe"; do
	echo "== ${input##*/}"
	test_report "${input}"
	test_script "${input}"
	test_scripting "${input}"
done
test_no_time
test_inject
test_inject_rounds
test_queue_size
test_memory
test_fallback

cleanup
exit ${err}
