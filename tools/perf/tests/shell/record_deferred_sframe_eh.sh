#!/bin/bash
# perf record --call-graph fp,defer: whole stacks of python3 with libsframe-eh.so
# SPDX-License-Identifier: GPL-2.0
#
# Debian's python3 and its libraries have neither frame pointers nor SFrame
# tables. Loaded as an auditor (LD_AUDIT), tools/sframe's libsframe-eh.so
# makes tables from each object's .eh_frame as ld.so maps it, and registers
# them: the deferred walks then go by tables. Records a python3 script with
# fp,defer and with dwarf (perf unwinds an 8 KiB copy of the stack), the
# auditor loaded in both so that the same code runs. 95% or more of the
# fp,defer samples have a whole stack, one that gets back to the program's
# entry (through __libc_start_main, or to ld.so's own entry while ld.so
# starts the program), and 95% or more of their callers are the ones dwarf
# found for the same frames. What stays out: samples taken while ld.so
# loads the auditor, before any table exists (a fixed time, about 200 ms
# under emulation with files read over 9p: the script runs long enough
# to make it 2 or 3% of the samples), and the lazy-binding trampoline
# (its frame is found from %rbx, which SFrame cannot say).

# shellcheck disable=SC2317 # the test functions are called through timed()
set -e

deferred_test=deferred_sframe_eh
# shellcheck source=lib/deferred_callchain.sh
. "$(dirname "$0")"/lib/deferred_callchain.sh

src=$(dirname "$0")/../../../sframe
lib=${tmpdir}/libsframe-eh.so
python=/usr/bin/python3
script='sum(i * i % 7 for i in range(4000000))'
min_whole=95

if [ ! -f "${src}/sframe_eh.c" ] || [ ! -x "${python}" ]; then
	echo "Skip: no tools/sframe next to perf's tests, or no ${python}"
	cleanup
	exit 2
fi
if ! make -s -C "${src}" OUTPUT="${tmpdir}" >"${tmpdir}/make.log" 2>&1; then
	echo "libsframe-eh.so does not build:"
	cat "${tmpdir}/make.log"
	cleanup
	exit 1
fi

# The converted tables are kept per user: the first start fills the cache,
# as a user's first run of a program does.
export SFRAME_EH_CACHE_DIR=${tmpdir}/cache
mkdir -m 700 "${SFRAME_EH_CACHE_DIR}"
LD_AUDIT=${lib} "${python}" -c pass

record() {
	perf record -q -e cpu-clock -F 500 --call-graph "$1" -o "$2" -- \
		env ${3:+"LD_AUDIT=$3"} "${python}" -c "${script}"
}

# One line per sample of python3 (or of the program $3 names): "whole" or "broken", then its user
# frames, innermost first, each as its file and offset in it (both runs
# map the objects at different addresses) and symbol. A caller's offset
# is its call's: a frame-pointer or table walk gives the return address,
# perf's DWARF unwinder the address before it ($2: 1 to step back from
# the former). Inlined functions are left out: only dwarf reports them.
stacks() {
	perf script --no-inline -i "$1" -F comm,ip,sym,dsoff 2>/dev/null |
		awk -v RS= -v step_back="$2" -v comm="${3:-python3}" '
	function hex(s,    i, v) {
		v = 0
		for (i = 3; i <= length(s); i++)
			v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
		return v
	}
	{
		n = split($0, lines, "\n")
		if (split(lines[1], head, " ") < 1 || head[1] != comm)
			next
		user = ""; whole = 0; last = ""
		for (i = 2; i <= n; i++) {
			if (split(lines[i], f, " ") < 3 || f[1] ~ /^ffffffff/)
				continue
			where = f[3]; sub(/^\(.*\//, "", where); sub(/\)$/, "", where)
			if (user != "" && step_back && match(where, /\+0x[0-9a-f]+$/))
				where = substr(where, 1, RSTART) \
					sprintf("0x%x", hex(substr(where, RSTART + 1)) - 1)
			sub(/@@.*/, "", f[2])
			last = where " " f[2]
			user = user ";" last
			if (f[2] ~ /^__libc_start_(call_)?main$/)
				whole = 1
		}
		if (last ~ /^ld-linux[^ ]* (_dl_start_user|_start)$/)
			whole = 1
		print (whole ? "whole" : "broken") user
	}'
}

record fp,defer "${tmpdir}/defer.data" "${lib}"
if ! perf evlist -v -i "${tmpdir}/defer.data" | grep -q CALLCHAIN_DEFERRED; then
	echo "Skip: the kernel cannot defer user callchains"
	cleanup
	exit 2
fi
stacks "${tmpdir}/defer.data" 1 >"${tmpdir}/defer.stacks"
record dwarf "${tmpdir}/dwarf.data" "${lib}"
stacks "${tmpdir}/dwarf.data" 0 >"${tmpdir}/dwarf.stacks"

# check_whole NAME STACKS MIN_SAMPLES: at least MIN_SAMPLES lines in the
# STACKS file, min_whole% of them whole; else the most frequent broken ones.
check_whole() {
	local name=$1 stacks=$2 min_samples=$3 samples whole

	samples=$(wc -l <"${stacks}")
	whole=$(grep -c "^whole" "${stacks}" || true)
	echo "  ${name}: ${whole} of ${samples} samples whole"
	if [ "${samples}" -lt "${min_samples}" ]; then
		fail "${name}: ${samples} samples, expected ${min_samples} or more"
	elif [ $((whole * 100)) -lt $((samples * min_whole)) ]; then
		fail "${name}: ${whole} of ${samples} whole, expected ${min_whole}% or more;" \
			"the most frequent broken ones:"
		grep "^broken" "${stacks}" | cut -d';' -f1-4 | sort | uniq -c | sort -rn | head -8
	fi
}

test_whole() {
	echo "fp,defer with libsframe-eh.so: ${min_whole}% of python3's samples have a whole stack"
	check_whole python3 "${tmpdir}/defer.stacks" 1000
}

# Each caller-callee pair of the whole fp,defer stacks, against dwarf's:
# where dwarf found callers of a frame (same file, same offset), the
# fp,defer caller of that frame is one of them. A table that names a
# wrong caller makes pairs dwarf never saw. Frames dwarf's copy of the
# stack did not reach, or that its run did not sample, are not compared.
# Weighed by samples; a rare caller of one run may miss in the other.
test_same_as_dwarf() {
	local counts compared missing

	echo "fp,defer with libsframe-eh.so finds the callers dwarf finds"
	pairs() {
		awk -F';' -v only="$2" '
			only && $1 != "whole" { next }
			{
				for (i = 2; i < NF; i++) {
					split($i, callee, " "); split($(i + 1), caller, " ")
					print callee[1] "\t" caller[1] "\t" $i " <- " $(i + 1)
				}
			}' "$1"
	}
	pairs "${tmpdir}/dwarf.stacks" 0 >"${tmpdir}/dwarf.pairs"
	pairs "${tmpdir}/defer.stacks" 1 >"${tmpdir}/defer.pairs"
	counts=$(awk -F'\t' -v missing="${tmpdir}/missing.pairs" '
		NR == FNR { callers[$1] = 1; pair[$1, $2] = 1; next }
		$1 in callers {
			compared++
			if (!(($1, $2) in pair)) {
				print $3 >missing
				wrong++
			}
		}
		END { print compared + 0, wrong + 0 }' \
		"${tmpdir}/dwarf.pairs" "${tmpdir}/defer.pairs")
	read -r compared missing <<<"${counts}"
	echo "  ${missing} of ${compared} callers not dwarf's"
	if ! grep -q ' __libc_start_call_main$' "${tmpdir}/dwarf.pairs"; then
		fail "dwarf found no stack back to __libc_start_call_main (no DWARF unwinder?)"
	elif [ "${compared}" -lt 1000 ] || [ $((missing * 100)) -gt $((compared * 5)) ]; then
		fail "${missing} of ${compared} callers are not dwarf's, expected 5% at most;" \
			"the most frequent:"
		sort "${tmpdir}/missing.pairs" | uniq -c | sort -rn | head -8
	fi
}

# A library that dlopen() loads, or dlmopen() into a namespace of its own
# (which the preload's dlopen() wrapper never sees): libz's crc32(),
# called in a loop. As an auditor, the library gives it a table as ld.so
# maps it, either way: the samples in libz get back to the entry.
test_dlopen() {
	local how samples whole

	echo "fp,defer with libsframe-eh.so: code that dlopen() and dlmopen() load"
	cat >"${tmpdir}/dl_crc.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef unsigned long (*crc32_fn)(unsigned long crc, const unsigned char *buf,
				  unsigned int len);

static unsigned char buf[1 << 20];

int main(int argc, char **argv)
{
	void *lib = argc > 1 && !strcmp(argv[1], "dlmopen") ?
		    dlmopen(LM_ID_NEWLM, "libz.so.1", RTLD_NOW) :
		    dlopen("libz.so.1", RTLD_NOW);
	unsigned long crc = 0;
	struct timespec ts;
	crc32_fn crc32;
	double end;

	if (!lib || !(crc32 = (crc32_fn)dlsym(lib, "crc32"))) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	end = ts.tv_sec + ts.tv_nsec / 1e9 + 2;
	do {
		crc = crc32(crc, buf, sizeof(buf));
		clock_gettime(CLOCK_MONOTONIC, &ts);
	} while (ts.tv_sec + ts.tv_nsec / 1e9 < end);
	return crc == 1;
}
EOF
	if ! ${CC:-cc} -O2 -o "${tmpdir}/dl_crc" "${tmpdir}/dl_crc.c" -ldl \
		2>"${tmpdir}/cc.err"; then
		fail "the dlopen() program does not build:"
		cat "${tmpdir}/cc.err"
		return
	fi
	for how in dlopen dlmopen; do
		perf record -q -e cpu-clock -F 500 --call-graph fp,defer \
			-o "${tmpdir}/${how}.data" -- \
			env "LD_AUDIT=${lib}" "${tmpdir}/dl_crc" "${how}"
		stacks "${tmpdir}/${how}.data" 1 dl_crc | grep "^[a-z]*;libz\.so" \
			>"${tmpdir}/${how}.stacks" || true
		check_whole "${how}, in libz" "${tmpdir}/${how}.stacks" 100
	done
}

timed test_whole
timed test_same_as_dwarf
timed test_dlopen

cleanup
exit ${err}
