#!/bin/bash
# perf record --call-graph fp,defer: programs without frame pointers, with SFrame
# SPDX-License-Identifier: GPL-2.0
#
# Builds a program without frame pointers and with SFrame tables (GNU as
# --gsframe), whose known chain main -> stage_a -> stage_b -> stage_c ends
# in a read system call made in stage_c and in a user-mode loop in
# spin_c, with %rbp zeroed in both. Records it with fp, fp,defer and dwarf:
# fp stops at the first frame; fp,defer joins kernel-mode and user-mode
# samples with the whole chain, read from the tables; dwarf finds the same
# stacks from the same samples' copies of the stack.

# shellcheck disable=SC2317 # the test functions are called through timed()
set -e

deferred_test=deferred_sframe
# shellcheck source=lib/deferred_callchain.sh
. "$(dirname "$0")"/lib/deferred_callchain.sh

prog=${tmpdir}/sframe_chain

cat >"${prog}.c" <<'EOF'
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>

#define NOIPA __attribute__((noipa))
#define CHUNK (256 << 10)

static char buf[CHUNK];

/* read(fd) made here, %rbp zeroed: frame pointers end at once. */
NOIPA long leaf_read(int fd)
{
	long ret = SYS_read;

	asm volatile("xor %%ebp, %%ebp\n\tsyscall"
		     : "+a" (ret) : "D" ((long)fd), "S" (buf), "d" ((long)CHUNK)
		     : "rbp", "rcx", "r11", "memory");
	return ret;
}

NOIPA void spin_c(unsigned long n)
{
	asm volatile("xor %%ebp, %%ebp\n1:\tdec %0\n\tjnz 1b"
		     : "+r" (n) : : "rbp", "cc");
}

#define STAGE(name, next, size)					\
NOIPA long name(int fd)						\
{								\
	volatile char frame[size];				\
	long ret;						\
								\
	frame[0] = 1;						\
	ret = next(fd);						\
	asm volatile("" : : : "memory");			\
	return ret + frame[0] - 1;				\
}

NOIPA long stage_c(int fd)
{
	volatile char frame[40];

	frame[0] = 1;
	spin_c(200000);
	return leaf_read(fd) + frame[0] - 1;
}
STAGE(stage_b, stage_c, 24)
STAGE(stage_a, stage_b, 72)

int main(int argc, char **argv)
{
	double end, t;
	struct timespec ts;
	int fd = open("/dev/zero", O_RDONLY);

	clock_gettime(CLOCK_MONOTONIC, &ts);
	end = ts.tv_sec + ts.tv_nsec / 1e9 + (argc > 1 ? atof(argv[1]) : 1);
	do {
		if (stage_a(fd) <= 0)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t = ts.tv_sec + ts.tv_nsec / 1e9;
	} while (t < end);
	return 0;
}
EOF

if ! ${CC:-cc} -O2 -g -fomit-frame-pointer -fno-optimize-sibling-calls -Wa,--gsframe \
	-o "${prog}" "${prog}.c" 2>"${tmpdir}/cc.err" ||
	! readelf -lW "${prog}" | grep -q GNU_SFRAME; then
	echo "Skip: no compiler, or no assembler with --gsframe (binutils 2.40+)"
	cleanup
	exit 2
fi

record() {
	perf record -q -e cpu-clock -F 2000 --call-graph "$1" -o "$2" -- "${prog}" 1
}


# One line per sample of the program in leaf_read (taken in the kernel) or
# spin_c (in user mode): "kernel" or "user", then its user frames from the
# innermost up to main, or to where the stack ends.
stacks() {
	perf script -i "$1" -F ip,sym 2>/dev/null | awk -v RS= '
	{
		n = split($0, lines, "\n"); kernel = 0; user = ""
		for (i = 1; i <= n; i++) {
			if (split(lines[i], f, " ") < 2)
				continue
			if (f[1] ~ /^ffffffff/) {
				kernel++
				continue
			}
			user = user (user == "" ? "" : ";") f[2]
			if (f[2] == "main")
				break
		}
		if (user ~ /^(leaf_read|spin_c)(;|$)/)
			print (kernel ? "kernel" : "user"), user
	}'
}

whole="stage_c;stage_b;stage_a;main"

for mode in fp,defer fp dwarf; do
	name=${mode/,/-}
	record "${mode}" "${tmpdir}/${name}.data"
	if [ "${mode}" = fp,defer ] &&
		! perf evlist -v -i "${tmpdir}/${name}.data" | grep -q CALLCHAIN_DEFERRED; then
		echo "Skip: the kernel cannot defer user callchains"
		cleanup
		exit 2
	fi
	stacks "${tmpdir}/${name}.data" >"${tmpdir}/${name}.stacks"
done

test_fp_stops() {
	echo "fp: the walk stops at the first frame"
	if ! grep -q . "${tmpdir}/fp.stacks"; then
		echo "  fp: no sample in leaf_read or spin_c"
		err=1
	elif grep -q "${whole}" "${tmpdir}/fp.stacks"; then
		echo "  fp: frame pointers found the chain, expected them to stop:"
		grep "${whole}" "${tmpdir}/fp.stacks" | sort | uniq -c | head -3
		err=1
	fi
}

test_defer_whole() {
	local where leaf got

	echo "fp,defer: kernel-mode and user-mode samples have the whole chain"
	for where in "kernel leaf_read" "user spin_c"; do
		leaf=${where#* }
		got=$(grep -c "^${where};" "${tmpdir}/fp-defer.stacks" || true)
		if [ "${got}" -lt 5 ]; then
			echo "  fp,defer: ${got} ${where%% *}-mode samples in ${leaf}," \
				"expected 5 or more"
			err=1
		fi
		if grep "^${where};" "${tmpdir}/fp-defer.stacks" |
			grep -qv "^${where};${whole}\$"; then
			echo "  fp,defer: broken stacks from ${leaf}:"
			grep "^${where};" "${tmpdir}/fp-defer.stacks" | grep -v "${whole}\$" |
				sort | uniq -c | head -5
			err=1
		fi
	done
}

# The distinct stacks (whatever the sample's mode) of each file.
test_same_as_dwarf() {
	echo "fp,defer finds the stacks dwarf finds"
	for name in fp-defer dwarf; do
		awk '{ print $2 }' "${tmpdir}/${name}.stacks" | sort -u >"${tmpdir}/${name}.set"
	done
	if ! grep -q "${whole}" "${tmpdir}/dwarf.set"; then
		echo "  dwarf: no stack with the whole chain (perf built without a DWARF unwinder?)"
		err=1
	fi
	if ! cmp -s "${tmpdir}/fp-defer.set" "${tmpdir}/dwarf.set"; then
		echo "  fp,defer and dwarf differ:"
		diff "${tmpdir}/fp-defer.set" "${tmpdir}/dwarf.set" | head -10
		err=1
	fi
}

timed test_fp_stops
timed test_defer_whole
timed test_same_as_dwarf

cleanup
exit ${err}
