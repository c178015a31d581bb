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
