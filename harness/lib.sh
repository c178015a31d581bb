# SPDX-License-Identifier: GPL-2.0
# Shared settings of the testbed scripts: where things live and how to fail.
# Sourced, never run.
# shellcheck shell=bash

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
TREE=${TREE:-$BUILD/linux}
export BASE_TARBALL=/usr/src/linux-source-6.12.tar.xz
JOBS=${JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/defer-ccache}
# Hash paths inside the checkout relative to it: a fresh clone elsewhere
# (CI) still hits the cache.
export CCACHE_BASEDIR=$TOP

die() {
	echo "${0##*/}: $*" >&2
	exit 1
}

note() {
	echo "${0##*/}: $*" >&2
}

# Top-level folders of this repository that are overlay: those the base
# kernel tree has too. Anything else (harness/, demo/, build/) is ours.
overlay_dirs() {
	local d
	for d in "$TOP"/*/; do
		d=${d%/}
		d=${d##*/}
		[ "$d" = build ] && continue
		git -C "$TREE" cat-file -e "base:$d" 2>/dev/null && echo "$d"
	done
	return 0
}

# Every overlay file, relative to the top, sorted.
overlay_files() {
	local dirs
	mapfile -t dirs < <(overlay_dirs)
	[ ${#dirs[@]} -eq 0 ] && return 0
	(cd "$TOP" && find "${dirs[@]}" -type f | LC_ALL=C sort)
}

# A digest of the overlay's names and contents: tells whether it changed.
overlay_stamp() {
	(cd "$TOP" && overlay_files | tr '\n' '\0' | xargs -0 -r sha256sum) |
		sha256sum | cut -d' ' -f1
}

# The tree object of the assembled tree's working copy, untracked files
# included, computed on a copy of its index so the tree's own index is
# left alone.
worktree_tree() {
	local idx
	idx=$(mktemp)
	cp "$TREE/.git/index" "$idx"
	GIT_INDEX_FILE=$idx git -C "$TREE" add -A
	GIT_INDEX_FILE=$idx git -C "$TREE" write-tree
	rm -f "$idx"
}

tree_git() {
	git -C "$TREE" -c user.name=testbed -c user.email=testbed@localhost \
		-c core.autocrlf=false "$@"
}

# Record the demo workload (build/demo/syscall-chain, running SECONDS,
# default 3) as harness/demo shows it, into DATA: cpu-clock at 1 kHz,
# --call-graph fp,defer (plain fp on a kernel without deferred callchains).
record_demo() {
	"$BUILD/perf/perf" record -q -e cpu-clock -F 1000 --call-graph fp,defer \
		-o "$1" -- "$BUILD/demo/syscall-chain" "${2:-3}"
}

# Test results: one line per result, "PASS name", "FAIL name" or "SKIP
# name", appended to the file named by $RESULTS; "WHY ..." lines after a
# FAIL or SKIP say why. harness/tally holds them against the manifest, the
# list of every result a run expects.
#
# Listing: with LIST_RESULTS=1 the runners below (step, run_kselftest,
# run_perf_test) and the guest scripts print the name of each result they
# would report, one per line, and run nothing. That is how make check
# knows, before it starts, what it expects.
listing() {
	[ "${LIST_RESULTS:-0}" = 1 ]
}

# result VERDICT NAME [WHY]
result() {
	echo "$1 $2" >>"$RESULTS"
	echo "== $1 $2${3:+: $3}"
	[ -z "${3:-}" ] || echo "WHY $3" >>"$RESULTS"
}

# Why the result just recorded failed: the last 5 lines of the test's own
# output (its assertions come last), kept with it for the tally (a CI log
# may keep only its end).
result_why() {
	local line

	{ grep -v "^ *$" || true; } | tail -n 5 | while IFS= read -r line; do
		echo "WHY ${line:0:200}" >>"$RESULTS"
	done
}

# step NAME COMMAND...: one result, PASS when COMMAND exits 0, else FAIL
# with the end of its output. A step that needs more than an exit status
# (a line it must print, a file it must write) checks that itself and
# exits non-zero without it.
step() {
	local name=$1 log status

	shift
	if listing; then
		echo "$name"
		return 0
	fi
	log=$(mktemp)
	# Not in a condition: a function run there would ignore set -e.
	set +e
	"$@" >"$log" 2>&1
	status=$?
	set -e
	cat "$log"
	if [ "$status" = 0 ]; then
		result PASS "$name"
	else
		result FAIL "$name"
		{ echo "exit status $status"; cat "$log"; } | result_why
	fi
	rm -f "$log"
}

# The names a kselftest_harness binary reports ("fixture.variant.test",
# the variant and its dot left out where there is none), from its -l
# table: per fixture, the rows pair its variants and its tests side by
# side (printf "%-20s %-25s %s"), and every variant runs every test.
kselftest_names() {
	local run=()

	# a compat program lists its tests on a host without IA32 emulation
	# too, through QEMU's user mode
	[ "$(od -An -tx1 -j4 -N1 "$1" | tr -d ' ')" = 01 ] && run=(qemu-i386)
	"${run[@]}" "$1" -l 2>&1 | awk '
	function flush(   i, j) {
		if (fixture == "")
			return
		if (nv == 0)
			variants[nv++] = ""
		for (i = 0; i < nv; i++)
			for (j = 0; j < nt; j++)
				print fixture (variants[i] == "" ? "" : "." variants[i]) "." tests[j]
		fixture = ""; nv = 0; nt = 0
	}
	/^# FIXTURE/ { header = 1; next }
	!header { exit 1 }
	/^-----/ { flush(); next }
	{
		line = $0
		if (line !~ /^ /) {
			flush()
			fixture = $1
			width = length(fixture) < 20 ? 20 : length(fixture)
			line = substr(line, width + 2)
		} else {
			line = substr(line, 22)
		}
		# the variant, where this row has one, then the test
		if (line ~ /^[^ ]/) {
			variants[nv++] = line; sub(/ .*/, "", variants[nv - 1])
			sub(/^[^ ]+ */, "", line)
		} else {
			sub(/^ +/, "", line)
		}
		if (line != "")
			tests[nt++] = line
	}
	END { flush(); exit !header }'
}

# Run a kselftest binary (TAP output) and record each of its test cases,
# named "BINARY:fixture.test"; a binary that dies before its plan is
# complete fails as a whole (the tally names the tests that never came).
run_kselftest() {
	local bin=$1 name=${1#"$BUILD/selftests/"} log planned=0 seen=0 line said="" skip

	if listing; then
		# a program that cannot list its tests is expected to, and fails
		if ! kselftest_names "$bin" | sed "s|^|$name:|"; then
			echo "$name: lists its tests (-l)"
		fi
		return 0
	fi
	log=$(mktemp)
	timeout -k 5 "${KSELFTEST_TIMEOUT:-600}" "$bin" 2>&1 | tee "$log" || true
	while read -r line; do
		case $line in
		"# RUN "* | "#  OK "* | "ok "*) said="" ;;
		"# "*) said+="${line#\# }"$'\n' ;;
		esac
		case $line in
		1..*) planned=${line#1..} ;;
		"ok "*"# SKIP"*)
			seen=$((seen + 1))
			line=${line#ok * }
			skip=${line#*# SKIP }
			result SKIP "$name:${line%% # SKIP*}" "${skip:-no reason given}"
			;;
		"ok "*)
			seen=$((seen + 1))
			line=${line#ok * }
			result PASS "$name:${line%% # *}"
			;;
		"not ok "*)
			seen=$((seen + 1))
			line=${line#not ok * }
			result FAIL "$name:${line%% # *}"
			result_why <<<"$said"
			said=""
			;;
		esac
	done <"$log"
	if [ "$planned" = 0 ] || [ "$seen" -lt "$planned" ]; then
		echo "run_kselftest: $name ran $seen of $planned planned tests"
	fi
	rm -f "$log"
}

# The results of the perf test described exactly $1, one per line:
# "SELECTOR<tab>NAME". A suite's SELECTOR is its number, and its results
# are its cases (or the suite itself, of one case). A single case of a
# suite (perf test numbers select whole suites) is selected by its
# description, which perf test matches by substring, and reports itself.
# Nothing if perf lists no such test. The plan is listed on the host, which
# may not run PERF_DIR's perf (a 32-bit one): PERF_LIST_DIR's names the
# same cases there.
perf_test_cases() {
	local dir=${PERF_DIR:-$BUILD/perf}

	if listing && [ -n "${PERF_LIST_DIR:-}" ]; then
		dir=$PERF_LIST_DIR
	fi
	# from the tree, where perf test finds its shell tests (as it runs them)
	(cd "$TREE" && "$dir/perf" test list 2>&1) | awk -v want="$1" '
	match($0, /^ *[0-9]+(\.[0-9]+)?: /) {
		number = substr($0, 1, RLENGTH - 2); sub(/^ +/, "", number)
		desc = substr($0, RLENGTH + 1)
		if (number !~ /\./) {
			mine = desc == want
			if (mine) { suite = number; cases = 0 }
			next
		}
		if (mine)
			names[cases++] = desc
		else if (desc == want)
			single = 1
	}
	END {
		if (suite == "") {
			if (single)
				print want "\t" want
			exit
		}
		if (cases == 0)
			print suite "\t" want
		for (i = 0; i < cases; i++)
			print suite "\t" names[i]
	}'
}

# Run the perf tests described exactly so (suites by number: perf test's
# own matching is by substring) and record each case as "perf test:CASE".
# A description perf does not list fails: a test that vanished (renamed,
# not built) must not pass by being silent. PERF_DIR: another build of perf;
# PERF_TEST_LABEL: what its results are named by instead of "perf test".
run_perf_test() {
	local dir=${PERF_DIR:-$BUILD/perf} label=${PERF_TEST_LABEL:-perf test}
	local desc cases numbers=() log line verdict said=""

	for desc in "$@"; do
		cases=$(perf_test_cases "$desc")
		if listing; then
			if [ -n "$cases" ]; then
				cut -f2- <<<"$cases" | sed "s/^/$label:/"
			else
				echo "$label:$desc"
			fi
			continue
		fi
		if [ -z "$cases" ]; then
			result FAIL "$label:$desc" "perf test list has no suite of that name"
			continue
		fi
		numbers+=("$(head -n1 <<<"$cases" | cut -f1)")
	done
	listing && return 0
	[ ${#numbers[@]} -gt 0 ] || return 0

	log=$(mktemp)
	# perf test finds its shell tests under ./tools/perf/tests/shell, and
	# they run "perf" from PATH. -v: a failure's output ends in the log.
	(cd "$TREE" && PATH=$dir:$PATH "$dir/perf" test -v "${numbers[@]}") 2>&1 |
		tee "$log" || true
	while IFS= read -r line; do
		if ! [[ $line =~ ^\ *[0-9]+(\.[0-9]+)?:\ (.*[^ ])\ *:\ *(Ok|FAILED!|Skip.*)$ ]]; then
			# the shell tests' "FAIL: why" lines, the C tests' complaints
			[[ $line =~ FAIL:|[Ff]ailed|[Ee]rror ]] && said+="$line"$'\n'
			continue
		fi
		desc=${BASH_REMATCH[2]}
		verdict=${BASH_REMATCH[3]}
		case $verdict in
		Ok) result PASS "$label:$desc" ;;
		FAILED!)
			result FAIL "$label:$desc"
			result_why <<<"$said"
			;;
		*)
			verdict=${verdict#Skip}
			verdict=${verdict# (}
			result SKIP "$label:$desc" "${verdict%)}"
			;;
		esac
		said=""
	done <"$log"
	rm -f "$log"
}

# Replace the README's section between "<!-- $1 begin -->" and
# "<!-- $1 end -->" with the file $2 (the benchmarks' tables).
readme_section() {
	local tmp=$BUILD/README.md.new

	awk -v table="$2" -v begin="<!-- $1 begin -->" -v end="<!-- $1 end -->" '
	$0 == begin {
		print
		while ((getline line < table) > 0)
			print line
		skip = 1
		next
	}
	$0 == end { skip = 0 }
	!skip' "$TOP/README.md" >"$tmp"
	grep -qxF "<!-- $1 end -->" "$tmp" || die "README.md has no $1 markers"
	mv "$tmp" "$TOP/README.md"
}

# The tracepoints the guest's tests and fuzzers open perf events on.
HELD_TRACEPOINTS=(
	sched:sched_switch sched:sched_wakeup sched:sched_wakeup_new
	sched:sched_migrate_task sched:sched_process_exec
	sched:sched_process_exit sched:sched_process_fork
	irq:softirq_entry irq:softirq_exit irq:softirq_raise
	preemptirq:irq_enable preemptirq:irq_disable
	raw_syscalls:sys_enter raw_syscalls:sys_exit
	syscalls:sys_enter_getppid syscalls:sys_exit_getppid
	signal:signal_generate signal:signal_deliver task:task_newtask
	timer:hrtimer_expire_entry unwind:unwind_deferred_walk nmi:nmi_handler
)
# The kernel functions the attr fuzzer puts kprobes on (harness/fuzz-attr.c).
HELD_KPROBES=(ksys_read __x64_sys_getppid __x64_sys_sched_yield)

# Under QEMU's TCG a vCPU may go on running its translation of kernel text
# that another vCPU has just rewritten. text_poke_bp() rewrites a
# tracepoint's static call sites each time the tracepoint's first probe
# comes or its last goes, and a CPU then runs the int3 of the rewrite after
# it ended: "Oops: int3", or "Fatal exception in interrupt" in softirq
# code. The base kernel does it too (sched and irq tracepoints enabled and
# disabled under load: within two minutes). Its cause is the emulator, not
# the kernel, so the guest keeps every tracepoint the tests use registered
# for the whole run: one counting perf event each, on a sleeping task. The
# tests' own events then join a registered probe and no text is rewritten.
# The kernel's perf events on tracepoints share one probe per tracepoint
# (raw_syscalls and syscalls: two on sys_enter and sys_exit, both held).
# Kprobes removed while hit end the same way.
# Returns once they are (perf stat execs its workload after it opened the
# events). They stay held until the VM powers off: letting them go would
# rewrite the text once more. A nested script finds them held already.
# The holding rewrites each tracepoint's text itself, once, and so does the
# trace instance of count_text_rewrites (its first event starts the
# sched_switch and sched_wakeup probes of ftrace's command line cache): a
# CPU idling in a tracepoint's caller once ran into such an int3 ("Oops:
# int3" in ttwu_do_wakeup() before the attr fuzzer began). So all that
# happens with the other CPUs offline, and they come back after.
hold_tracepoints() {
	local ret=1

	[ "${TRACEPOINTS_HELD:-}" = 1 ] && return 0
	other_cpus_online 0 || return 1
	hold_tracepoints_now "${PERF_DIR:-$BUILD/perf}" && ret=0
	other_cpus_online 1 || ret=1
	return $ret
}

# Every CPU but the boot CPU offline (0) or online (1); fails when one
# cannot be set, or when CPU hotplug is missing and the tests that need
# other CPUs would not get them.
other_cpus_online() {
	local f ret=0 n=0

	for f in /sys/devices/system/cpu/cpu[1-9]*/online; do
		[ -e "$f" ] || continue
		n=$((n + 1))
		[ "$(cat "$f")" = "$1" ] && continue
		echo "$1" >"$f" || {
			note "cannot set $f to $1"
			ret=1
		}
	done
	if [ "$n" = 0 ]; then
		note "no CPU to take offline or bring online (CPU hotplug, or -smp 1)"
		ret=1
	fi
	return $ret
}

hold_tracepoints_now() {
	local events="" tp holder dir=$1
	# An optimized kprobe is a jump that text_poke_bp() writes, and
	# rewrites whenever another kprobe joins or leaves it: keep them int3s,
	# which stay in place while probes come and go.
	[ -w /proc/sys/debug/kprobes-optimization ] &&
		echo 0 >/proc/sys/debug/kprobes-optimization
	count_text_rewrites start || {
		note "cannot set up the kprobe on text_poke_bp() that counts rewrites"
		return 1
	}
	for tp in "${HELD_TRACEPOINTS[@]}"; do
		[ -d "/sys/kernel/tracing/events/${tp/://}" ] && events+=${events:+,}$tp
	done
	# Kprobes likewise: one armed kprobe (and kretprobe) per function the
	# attr fuzzer probes; its kprobes then join them, no int3 comes and goes.
	for tp in "${HELD_KPROBES[@]}"; do
		{ echo "p:held/$tp $tp" && echo "r:held/${tp}_ret $tp"; } \
			>>/sys/kernel/tracing/kprobe_events 2>/dev/null || continue
		events+=${events:+,}held:$tp,held:${tp}_ret
	done
	# Not a job of the caller: its "wait" must not wait for it.
	holder=$("$dir/perf" stat -e "$events" -- sleep 1000000 </dev/null >/dev/null 2>&1 &
		echo $!)
	for _ in $(seq 300); do
		kill -0 "$holder" 2>/dev/null || break
		if pgrep -x -P "$holder" sleep >/dev/null; then
			export TRACEPOINTS_HELD=1
			return 0
		fi
		sleep 0.1
	done
	note "the tracepoints could not be held (perf stat -e $events)"
	return 1
}

# The text_poke_bp() calls since "count_text_rewrites start" (a kprobe that
# writes into a trace instance of its own, each call's stack after it), so
# that a run can check that no text was rewritten once the tracepoints were
# held. "count_text_rewrites caller N" prints the stack of the call after
# the first N, and the tracepoint whose probe came or went last before it
# (kprobes on the (un)register functions: a tracepoint's first field is
# its name).
REWRITES=/sys/kernel/tracing/instances/text_rewrites
count_text_rewrites() {
	local fn

	case ${1:-count} in
	start)
		[ -d "$REWRITES" ] && return 0
		echo "p:rewrites/text_poke_bp text_poke_bp" \
			>>/sys/kernel/tracing/kprobe_events || return 1
		for fn in tracepoint_probe_register_prio tracepoint_probe_unregister; do
			echo "p:rewrites/$fn $fn name=+0(+0(\$arg1)):string" \
				>>/sys/kernel/tracing/kprobe_events || return 1
		done
		mkdir "$REWRITES" &&
			echo 1 >"$REWRITES/options/stacktrace" &&
			echo 1 >"$REWRITES/events/rewrites/enable"
		;;
	count)
		# "-": the counter is not set up; nothing can be said
		if [ -r "$REWRITES/trace" ]; then
			grep -c " text_poke_bp: " "$REWRITES/trace" || true
		else
			echo -
		fi
		;;
	caller)
		[ -r "$REWRITES/trace" ] &&
			awk -v skip="${2:-0}" '
				/ tracepoint_probe_(register_prio|unregister): / {
					if (n <= skip) { tp = $0; sub(/.*: \(/, "(", tp) }
					in_poke = 0
					next
				}
				/ text_poke_bp: / {
					in_poke = ++n == skip + 1
					if (in_poke && tp != "")
						print "after " tp
					next
				}
				in_poke && /=> / { print; if (++k == 8) exit }' \
				"$REWRITES/trace"
		;;
	esac
}

# One result, "$1: ...": no text_poke_bp() call since there were $2 (the
# caller's count_text_rewrites after hold_tracepoints); if there was one,
# its stack is the reason. A counter that is not set up fails it.
result_text_rewrites() {
	local name="$1: no kernel text rewritten with the tracepoints held (text_poke_bp())" n

	if listing; then
		echo "$name"
		return 0
	fi
	n=$(count_text_rewrites)
	if [ "$n" = - ] || [ "$2" = - ]; then
		result FAIL "$name" "the kprobe on text_poke_bp() that counts rewrites is not set up"
	elif [ $((n - $2)) = 0 ]; then
		result PASS "$name"
	else
		result FAIL "$name"
		{ echo "$((n - $2)) text_poke_bp() calls, the first from:"
		  count_text_rewrites caller "$2"; } | result_why
	fi
}

# Leaks: the objects a run made and did not free. "measure_objects" prints
# "perf_event tasks mms kmalloc-4k": the slab objects in use of each, those
# of task_struct and mm_struct beyond the live tasks and mms. Each count is
# exact: a shrink first empties the cache's per-CPU slabs and its part of
# KASAN's quarantine.
slab_objects() {
	local dir=/sys/kernel/slab/$1 n

	[ -r "$dir/objects" ] || return 1
	echo 1 >"$dir/shrink" 2>/dev/null || true
	read -r n _ <"$dir/objects"
	echo "$n"
}

measure_objects() {
	local events tasks mms k4 t=(/proc/[0-9]*/task/[0-9]*) p size live_mms=0

	if ! { events=$(slab_objects perf_event) && tasks=$(slab_objects task_struct) &&
		mms=$(slab_objects mm_struct) && k4=$(slab_objects kmalloc-4k); }; then
		note "no SLUB sysfs files (/sys/kernel/slab): leaks cannot be counted"
		return 1
	fi
	# a kernel thread's statm is all zeroes: no mm
	for p in /proc/[0-9]*; do
		{ read -r size _ <"$p/statm"; } 2>/dev/null || continue
		[ "$size" != 0 ] && live_mms=$((live_mms + 1))
	done
	echo "$events $((tasks - ${#t[@]})) $((mms - live_mms)) $k4"
}

# The leak results of a run named $1 (its prefix), against the counts
# measure_objects gave before it ($2). Events and tasks go through RCU, the
# mms of exited tasks may still be in use lazily by idle CPUs: this waits,
# at most $3 seconds, for the counts to come back. A task or two may still
# be on its way out, an mm per CPU in lazy use; the 4 KiB walk caches are
# freed with their tasks (a leak shows as one per task that deferred,
# thousands in a storm) and other kmalloc users come and go.
LEAK_NAMES=("no leaked perf events" "no leaked tasks" "no leaked mms"
	"no leaked 4 KiB walk caches")
leak_results() {
	local prefix=$1 was=() now=() slack until_s i ok name

	if listing; then
		printf "$prefix: %s\n" "${LEAK_NAMES[@]}"
		return 0
	fi
	until_s=$((SECONDS + $3))
	read -ra was <<<"$2"
	slack=(0 2 "$(nproc)" 64)
	while :; do
		read -ra now <<<"$(measure_objects)"
		if [ ${#now[@]} -ne 4 ] || [ ${#was[@]} -ne 4 ]; then
			break
		fi
		ok=1
		for i in 0 1 2 3; do
			[ "${now[i]}" -gt $((was[i] + slack[i])) ] && ok=0
		done
		[ "$ok" = 1 ] || [ "$SECONDS" -ge "$until_s" ] && break
		sleep 1
	done
	echo "$prefix: objects after (perf_event, task_struct, mm_struct, kmalloc-4k): ${now[*]}"
	for i in 0 1 2 3; do
		name="$prefix: ${LEAK_NAMES[i]}"
		if [ ${#was[@]} -ne 4 ] || [ ${#now[@]} -ne 4 ]; then
			result FAIL "$name" "no slab counts (/sys/kernel/slab)"
		elif [ "${now[i]}" -le $((was[i] + slack[i])) ]; then
			result PASS "$name"
		else
			result FAIL "$name" "${was[i]} before, ${now[i]} after (slack ${slack[i]})"
		fi
	done
}

# checkpatch_findings FILE OPTION...: what scripts/checkpatch.pl --strict
# finds in FILE (a patch, or a source file with -f), one finding per line;
# exit status 2 when it did not run. Never waived: CamelCase is, for the
# names of C99's <inttypes.h> (PRIu64..., tools/perf prints with them),
# <elf.h> (Elf64_Phdr..., the selftests read ELF files) and <dlfcn.h>
# (Dl_info, Lmid_t, tools/sframe loads with them): --no-tree cannot know
# them.
checkpatch_findings() {
	local f=$1 report status=0 scratch=$BUILD/checkpatch

	shift
	mkdir -p "$scratch"
	# GIT_DIR: no git repository for checkpatch. In one, it checks a
	# file that git tracks as a source file even when it is a patch
	# (git_is_single_file()), so every blank context line reads as added
	# trailing whitespace. It writes a camelcase cache into its working
	# directory: run it in build/, never in the repository.
	report=$(cd "$scratch" &&
		GIT_DIR=/nonexistent perl "$TREE/scripts/checkpatch.pl" --strict --no-tree \
			--terse --show-types --no-summary "$@" "$f" 2>&1) || status=$?
	if [ "$status" -gt 1 ]; then
		echo "checkpatch.pl did not run on $f (exit status $status): ${report:0:200}"
		return 2
	fi
	echo "$report" | grep -E ': (ERROR|WARNING|CHECK):' |
		grep -vE 'CHECK:CAMELCASE: Avoid CamelCase: <(PRI[a-zA-Z]+(8|16|32|64|MAX|PTR)|Elf(32|64)_[A-Z][a-z]+|Dl_info|Lmid_t)>' |
		sed "s|$TOP/||" || true
}
