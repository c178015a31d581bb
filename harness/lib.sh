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

# Test results: one line per test case, "PASS name", "FAIL name" or
# "SKIP name: reason", appended to the file named by $RESULTS.
result() {
	echo "$1 $2" >>"$RESULTS"
	echo "== $1 $2"
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

# Run a kselftest binary (TAP output) and record each of its test cases;
# a binary that dies before its plan is complete fails as a whole.
run_kselftest() {
	local bin=$1 name=${1##*/} log planned=0 seen=0 line said=""

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
			result SKIP "$name:${line%% # SKIP*}: ${line#*# SKIP }"
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
		result FAIL "$name: ran $seen of $planned planned tests"
	fi
	rm -f "$log"
}

# Run "perf test" on the tests named and record each result line.
# A name that matches no test is a failure: a test that vanished (renamed,
# not built) must not pass by being silent.
run_perf_test() {
	local log line desc verdict name seen="" said="" dir=${PERF_DIR:-$BUILD/perf}

	log=$(mktemp)
	# perf test finds its shell tests under ./tools/perf/tests/shell, and
	# they run "perf" from PATH. -v: a failure's output ends in the log.
	# PERF_DIR: another build of perf (build/perf-asan).
	(cd "$TREE" && PATH=$dir:$PATH "$dir/perf" test -v "$@") 2>&1 |
		tee "$log" || true
	while IFS= read -r line; do
		# A suite of several cases has a line of its own, without verdict.
		[[ $line =~ ^\ *[0-9]+:\ (.*[^ ])\ *:\ *$ ]] && seen+="${BASH_REMATCH[1]}"$'\n'
		if ! [[ $line =~ ^\ *[0-9.]+:\ (.*[^ ])\ *:\ (Ok|FAILED!|Skip.*)$ ]]; then
			# the shell tests' "FAIL: why" lines, the C tests' complaints
			[[ $line =~ FAIL:|[Ff]ailed|[Ee]rror ]] && said+="$line"$'\n'
			continue
		fi
		desc=${BASH_REMATCH[1]}
		verdict=${BASH_REMATCH[2]}
		seen+="$desc"$'\n'
		case $verdict in
		Ok) result PASS "perf test:$desc" ;;
		FAILED!)
			result FAIL "perf test:$desc"
			result_why <<<"$said"
			;;
		*) result SKIP "perf test:$desc: $verdict" ;;
		esac
		said=""
	done <"$log"
	rm -f "$log"
	for name in "$@"; do
		grep -qiF -- "$name" <<<"$seen" || result FAIL "perf test:$name: no such test"
	done
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
	timer:hrtimer_expire_entry unwind:unwind_deferred_walk
)
# The kernel functions the attr fuzzer puts kprobes on (deferred_fuzz_attr.c).
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
	other_cpus_online 0
	hold_tracepoints_now "${PERF_DIR:-$BUILD/perf}" && ret=0
	other_cpus_online 1
	return $ret
}

# Every CPU but the boot CPU offline (0) or online (1), where CPU hotplug is.
other_cpus_online() {
	local f

	for f in /sys/devices/system/cpu/cpu[1-9]*/online; do
		[ -w "$f" ] || continue
		[ "$(cat "$f")" = "$1" ] && continue
		echo "$1" >"$f" || note "cannot set $f to $1"
	done
}

hold_tracepoints_now() {
	local events="" tp holder dir=$1
	# An optimized kprobe is a jump that text_poke_bp() writes, and
	# rewrites whenever another kprobe joins or leaves it: keep them int3s,
	# which stay in place while probes come and go.
	[ -w /proc/sys/debug/kprobes-optimization ] &&
		echo 0 >/proc/sys/debug/kprobes-optimization
	count_text_rewrites start
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
			>>/sys/kernel/tracing/kprobe_events || return 0
		for fn in tracepoint_probe_register_prio tracepoint_probe_unregister; do
			echo "p:rewrites/$fn $fn name=+0(+0(\$arg1)):string" \
				>>/sys/kernel/tracing/kprobe_events || true
		done
		mkdir "$REWRITES"
		echo 1 >"$REWRITES/options/stacktrace"
		echo 1 >"$REWRITES/events/rewrites/enable"
		;;
	count)
		if [ -r "$REWRITES/trace" ]; then
			grep -c " text_poke_bp: " "$REWRITES/trace" || true
		else
			echo 0
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
# its stack is the reason.
result_text_rewrites() {
	local n

	n=$(($(count_text_rewrites) - $2))
	if [ "$n" = 0 ]; then
		result PASS "$1: no kernel text rewritten with the tracepoints held (text_poke_bp())"
	else
		result FAIL "$1: no kernel text rewritten with the tracepoints held (text_poke_bp())"
		{ echo "$n text_poke_bp() calls, the first from:"
		  count_text_rewrites caller "$2"; } | result_why
	fi
}
