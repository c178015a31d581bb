// SPDX-License-Identifier: GPL-2.0
/*
 * Bad SFrame tables and the deferred user stack walk, driven through the
 * test hook of lib/test_unwind_deferred.c: tables prctl(PR_SFRAME)
 * refuses; damaged tables, FDEs out of order and fuzzed tables, which end
 * the walk; and the worst table a process can register, whose walk its
 * budget of reads ends.
 *
 * Built with SFrame (-Wa,--gsframe) and without frame pointers, as
 * sframe_test.h says.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <linux/prctl.h>

#include "../kselftest_harness.h"
#include "udt_hook.h"
#include "sframe_chain.h"
#include "sframe_test.h"

#define FUZZ_ROUNDS		3000

/* The FDE in a version 2 table of jit_table(). */
#define V2_FDE		SFRAME_HDR_SIZE

/* A header prctl(PR_SFRAME_ADD) refuses: one byte of a good one changed. */
struct bad_header {
	const char *what;
	int at;
	unsigned char val;
};

TEST_F(sframe, bad_tables_are_refused)
{
	static const struct bad_header bad[] = {
		{ "a bad magic", 0, 0x00 },
		{ "version 0", 2, 0 },
		{ "version 4", 2, 4 },
		{ "version 1 with PC-relative starts", 2, 1 },
		{ "FDEs not sorted", 3, 0 },
		{ "an unknown flag", 3, SFRAME_F_FDE_SORTED | 0x80 },
		{ "another ABI", 4, 1 },
		{ "an auxiliary header past the end", 7, 255 },
		{ "no FDE", 8, 0 },
		{ "2^24 FDEs", 11, 1 },
		{ "FREs past the end", 17, 1 },
		{ "FREs among the FDEs", 24, 4 },
	};
	unsigned long table = (unsigned long)self->jit.table;
	unsigned long code = (unsigned long)self->jit.code;
	unsigned long size = self->jit.table_size, hole;
	struct prctl_sframe arg = { };
	struct {
		struct prctl_sframe arg;
		__u64 more;
	} bigger = { };
	unsigned char saved;
	size_t i;
	void *p;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		saved = self->jit.table[bad[i].at];
		self->jit.table[bad[i].at] = bad[i].val;
		EXPECT_EQ(-EINVAL, jit_add(&self->jit, size)) TH_LOG("%s", bad[i].what);
		self->jit.table[bad[i].at] = saved;
	}
	/* Version 3 has no frame pointer flag. */
	size = jit_v3_table(&self->jit, false, -1);
	self->jit.table[3] |= SFRAME_F_FRAME_POINTER;
	EXPECT_EQ(-EINVAL, jit_add(&self->jit, size))
		TH_LOG("version 3 with the frame pointer flag");
	size = jit_table(&self->jit, 2, true, self->jit.table);

	/* An address nothing is mapped at. */
	p = mmap(NULL, self->jit.page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, munmap(p, self->jit.page));
	hole = (unsigned long)p;

	EXPECT_EQ(-EINVAL, sframe_add(table, size - 1, code, sizeof(jit_code)))
		TH_LOG("declared shorter than its FREs");
	EXPECT_EQ(-EINVAL, sframe_add(table, SFRAME_HDR_SIZE - 1, code, sizeof(jit_code)))
		TH_LOG("shorter than a header");
	EXPECT_EQ(-EINVAL, sframe_add(table, 0, code, sizeof(jit_code)))
		TH_LOG("no table");
	EXPECT_EQ(-EFAULT, sframe_add(table + self->jit.page, size, code, sizeof(jit_code)))
		TH_LOG("a table on an inaccessible page");
	EXPECT_EQ(-EFAULT, sframe_add(hole, size, code, sizeof(jit_code)))
		TH_LOG("a table where nothing is mapped");
	EXPECT_EQ(-EINVAL, sframe_add(table, size, code, 0)) TH_LOG("no code");
	EXPECT_EQ(-EINVAL, sframe_add(table, size, hole, sizeof(jit_code)))
		TH_LOG("code that is not mapped");
	EXPECT_EQ(-EINVAL, sframe_add(table, size, (1UL << 47) - 2048, 4096))
		TH_LOG("code past the user address space");
	EXPECT_EQ(-EINVAL, sframe_add(table, size, code, -4096UL))
		TH_LOG("code that wraps around");

	/* The good table, then the errors of its neighbours and of prctl(). */
	ASSERT_EQ(0, jit_add(&self->jit, size));
	EXPECT_EQ(-EEXIST, jit_add(&self->jit, size)) TH_LOG("two tables for the same code");
	EXPECT_EQ(-EEXIST, sframe_add(table, size, code + 8, 64))
		TH_LOG("two tables for overlapping code");
	EXPECT_EQ(-ENOENT, sframe_remove(code + 1))
		TH_LOG("REMOVE takes the start of the table's code");
	EXPECT_EQ(-EINVAL, prctl(PR_SFRAME, 99, 0, 0, 0) ? -errno : 0)
		TH_LOG("an unknown operation");
	EXPECT_EQ(-EINVAL, prctl(PR_SFRAME, PR_SFRAME_REMOVE, code, 1, 0) ? -errno : 0)
		TH_LOG("REMOVE with arg4 set");
	EXPECT_EQ(-EINVAL, prctl(PR_SFRAME, PR_SFRAME_ADD, &arg, sizeof(arg), 1) ?
		  -errno : 0) TH_LOG("arg5 must be 0");
	EXPECT_EQ(-EFAULT, prctl(PR_SFRAME, PR_SFRAME_ADD, NULL, sizeof(arg), 0) ?
		  -errno : 0) TH_LOG("no structure");
	bigger.arg = (struct prctl_sframe) { table, size, code, sizeof(jit_code) };
	bigger.more = 1;
	EXPECT_EQ(-E2BIG, prctl(PR_SFRAME, PR_SFRAME_ADD, &bigger, sizeof(bigger), 0) ?
		  -errno : 0) TH_LOG("a longer structure, with fields this kernel lacks set");
	EXPECT_EQ(-E2BIG, prctl(PR_SFRAME, PR_SFRAME_ADD, table, self->jit.page + 1, 0) ?
		  -errno : 0) TH_LOG("a structure longer than a page");
	EXPECT_EQ(0, sframe_remove(code));
	EXPECT_EQ(-ENOENT, sframe_remove(code));
}

/* Damage a table accepts at registration, found only when walking. */
struct damage {
	const char *what;
	int at, val;		/* a byte changed */
	int at2, val2;		/* and another one, if at2 */
	bool frame_pointers;	/* also set SFRAME_F_FRAME_POINTER */
};

TEST_F(sframe, damaged_tables_end_the_walk)
{
	int call = v2_fre(JIT_CALL_ROW), next = v2_fre(JIT_CALL_ROW + 1);
	const struct damage bad[] = {
		{ "a function that ends before the call", V2_FDE + 4, 0x0d },
		{ "the same in code that keeps frame pointers", V2_FDE + 4, 0x0d,
		  .frame_pointers = true },
		{ "a function somewhere else", V2_FDE + 1, 0x00 },
		{ "FREs past the sub-section", V2_FDE + 8, 200 },
		{ "more FREs than the sub-section holds", V2_FDE + 12, 0xff,
		  16, next - v2_fre(0) },
		{ "an FRE start type of 3", V2_FDE + 16, 3 },
		{ "a PCMASK FDE with blocks of 0 bytes", V2_FDE + 16, 0x10 },
		{ "FRE starts that do not increase", call, 0x01 },
		{ "an FRE with offsets of size 3", call + 1, FRE_INFO(2) | 3 << 5 },
		{ "an FRE with 4 offsets", call + 1, FRE_INFO(4) },
		{ "an FRE with an offset too many", call + 1, FRE_INFO(3) },
		{ "an FRE with its return address mangled", call + 1, FRE_INFO(2) | 0x80 },
		{ "a return address undefined (outermost)", call + 1, FRE_INFO(0) },
		{ "a CFA below the stack pointer", call + 2, 0xf8 },
		{ "a CFA at the stack pointer", call + 2, 0 },
	};
	struct udt_result res;
	struct call_jit cj;
	struct cb_walk w;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		jit_table(&self->jit, 2, true, self->jit.table);
		self->jit.table[bad[i].at] = bad[i].val;
		if (bad[i].at2)
			self->jit.table[bad[i].at2] = bad[i].val2;
		if (bad[i].frame_pointers)
			self->jit.table[3] |= SFRAME_F_FRAME_POINTER;
		ASSERT_EQ(0, jit_add(&self->jit, self->jit.table_size))
			TH_LOG("%s: refused at registration", bad[i].what);
		ASSERT_EQ(0, walk_jit(&self->jit, self->fd, &w, &cj, &res));
		expect_jit_stop(_metadata, &self->jit, &w, &cj, &res, bad[i].what);
		ASSERT_EQ(0, sframe_remove((unsigned long)self->jit.code));
	}
	/* The table undamaged: the damage made the difference. */
	jit_table(&self->jit, 2, true, self->jit.table);
	ASSERT_EQ(0, jit_add(&self->jit, self->jit.table_size));
	ASSERT_EQ(0, walk_jit(&self->jit, self->fd, &w, &cj, &res));
	expect_jit_walk(_metadata, &self->jit, &w, &cj, &res, "undamaged");
	ASSERT_EQ(0, sframe_remove((unsigned long)self->jit.code));
}

/*
 * The program's own table with its FDEs reversed in place, still flagged
 * sorted (the walk reads what it has not cached of the table at every
 * walk): the binary search misses, and the walk ends where it does, with
 * what it found.
 */
TEST_F(sframe, unsorted_fdes_end_the_walk)
{
	unsigned char *hdr = (unsigned char *)self->prog.sframe_start, *fdes, *copy;
	unsigned long page = self->jit.page, size = self->prog.sframe_size;
	unsigned long lo = self->prog.sframe_start & ~(page - 1);
	unsigned long hi = (self->prog.sframe_start + size + page - 1) & ~(page - 1);
	unsigned long want[4];
	uint32_t num_fdes, fdes_off;
	struct udt_result res;
	size_t fde_size, i;
	struct chain c;

	ASSERT_EQ(SFRAME_MAGIC, *(uint16_t *)hdr);
	/* PC-relative starts would move with their FDEs. */
	if (hdr[3] & SFRAME_F_PCREL)
		SKIP(return, "the toolchain writes PC-relative FDEs");
	fde_size = hdr[2] == 1 ? SFRAME_FDE_V1_SIZE : SFRAME_FDE_V2_SIZE;
	memcpy(&num_fdes, hdr + 8, 4);
	memcpy(&fdes_off, hdr + 20, 4);
	ASSERT_LE(4, num_fdes) TH_LOG("want a table of some functions");
	fdes = hdr + SFRAME_HDR_SIZE + hdr[7] + fdes_off;

	copy = malloc(num_fdes * fde_size);
	ASSERT_NE(NULL, copy);
	memcpy(copy, fdes, num_fdes * fde_size);
	ASSERT_EQ(0, mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE));
	for (i = 0; i < num_fdes; i++)
		memcpy(fdes + i * fde_size, copy + (num_fdes - 1 - i) * fde_size, fde_size);

	ASSERT_EQ(0, walk_chain(self->fd, &c, &res));

	memcpy(fdes, copy, num_fdes * fde_size);
	ASSERT_EQ(0, mprotect((void *)lo, hi - lo, PROT_READ));
	free(copy);

	chain_want(&c, want);
	EXPECT_GT(4, res.nr) TH_LOG("reversed FDEs: expected the walk to end early");
	expect_walk(_metadata, &res, want, res.nr < 4 ? res.nr : 4, false,
		    "reversed FDEs: a prefix of the chain");
	/*
	 * Sorted again, and registered again, as a changed table must be
	 * (what the walks found in it is cached): the whole chain.
	 */
	ASSERT_EQ(0, sframe_remove(self->prog.text_start));
	self->prog_removed = true;
	ASSERT_EQ(0, sframe_add(self->prog.sframe_start, self->prog.sframe_size,
				self->prog.text_start, self->prog.text_size));
	self->prog_removed = false;
	ASSERT_EQ(0, walk_chain(self->fd, &c, &res));
	chain_want(&c, want);
	expect_walk(_metadata, &res, want, 4, false, "the table restored");
}

/*
 * The worst table a process can register: one function of 1 MiB whose
 * rows are as many as a function may have (the kernel's cap is 8,192; real
 * code needs up to some 6,700), and a recursion inside it, deeper than a
 * walk goes. Each frame's return address lies past its last row: a walk
 * by the table reads every row for every frame, millions of reads for the
 * whole stack. The recursion alternates between two call sites, so that
 * no frame's address is its callee's: the walk's memory of the last
 * frame's rule (sframe_find()) cannot spare a single scan. The walk's
 * budget (UNWIND_USER_MAX_READS) ends it instead, with what it found.
 */
#define WORST_CODE_SIZE		(1024 * 1024)
#define WORST_BODY_ROWS		8000
#define WORST_DEPTH		600
#define WORST_MAX_READS		16384	/* UNWIND_USER_MAX_READS */
#define FRE_TYPE_ADDR4		2
#define WORST_FRE_LEN(fp)	(4 + 1 + ((fp) ? 2 : 1))

/*
 * deep(depth, cb, arg): push %rbp, zero it, make a frame, slide through
 * the body; then deep(depth - 1, cb, arg), from one call site when
 * depth - 1 is odd and from another when it is even, or cb(arg) at
 * depth 0.
 */
#define WORST_CALL_ODD		14	/* its call, returning to +19 */
#define WORST_CALL_EVEN		21	/* returning to +26 */
#define WORST_CB_RET		36
#define WORST_POP		40
static const unsigned char worst_tail[] = {
	0x48, 0x85, 0xff,		/* +0:  test %rdi,%rdi */
	0x74, 0x17,			/* +3:  je   +28 */
	0x48, 0xff, 0xcf,		/* +5:  dec  %rdi */
	0x40, 0xf6, 0xc7, 0x01,		/* +8:  test $1,%dil */
	0x74, 0x07,			/* +12: je   +21 */
	0xe8, 0, 0, 0, 0,		/* +14: call deep (rel32 filled in) */
	0xeb, 0x0f,			/* +19: jmp  +36 */
	0xe8, 0, 0, 0, 0,		/* +21: call deep (rel32 filled in) */
	0xeb, 0x08,			/* +26: jmp  +36 */
	0x48, 0x89, 0xf0,		/* +28: mov  %rsi,%rax */
	0x48, 0x89, 0xd7,		/* +31: mov  %rdx,%rdi */
	0xff, 0xd0,			/* +34: call *%rax */
	0x48, 0x83, 0xc4, 0x08,		/* +36: add  $8,%rsp */
	0x5d,				/* +40: pop  %rbp */
	0xc3,				/* +41: ret */
};

static unsigned char *worst_fre(unsigned char *p, uint32_t start, int cfa,
				int fp)
{
	memcpy(p, &start, 4);
	p[4] = FRE_INFO(fp ? 2 : 1);
	p[5] = cfa;
	if (fp)
		p[6] = fp;
	return p + WORST_FRE_LEN(fp);
}

TEST_F(sframe, worst_table_walk_ends_within_its_budget)
{
	size_t tail = WORST_CODE_SIZE - sizeof(worst_tail), body_rows = WORST_BODY_ROWS;
	size_t fre_len, table_size, map_size, i;
	unsigned char *map, *code, *table, *p;
	uint32_t u32, nr_fres = body_rows + 4;
	int32_t rel, start;
	struct cb_walk w = { .fd = self->fd };
	struct udt_result res;
	double t0, t1;
	long ret;
	uint16_t u16;

	fre_len = WORST_FRE_LEN(0) * 2 + WORST_FRE_LEN(1) * (body_rows + 2);
	table_size = SFRAME_HDR_SIZE + SFRAME_FDE_V2_SIZE + fre_len;
	map_size = WORST_CODE_SIZE + ((table_size + self->jit.page - 1) & ~(self->jit.page - 1));
	map = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, map) TH_LOG("mmap: %s", strerror(errno));
	code = map;
	table = map + WORST_CODE_SIZE;

	/* The code: prologue, a body of nops, the tail. */
	memset(code, 0x90, WORST_CODE_SIZE);
	memcpy(code, "\x55\x31\xed\x48\x83\xec\x08", 7);
	memcpy(code + tail, worst_tail, sizeof(worst_tail));
	rel = -(int32_t)(tail + WORST_CALL_ODD + 5);
	memcpy(code + tail + WORST_CALL_ODD + 1, &rel, 4);
	rel = -(int32_t)(tail + WORST_CALL_EVEN + 5);
	memcpy(code + tail + WORST_CALL_EVEN + 1, &rel, 4);

	/* The table: header, one FDE, the rows. */
	p = table;
	u16 = SFRAME_MAGIC;
	memcpy(p, &u16, 2);
	p[2] = 2;
	p[3] = SFRAME_F_FDE_SORTED | SFRAME_F_PCREL;
	p[4] = SFRAME_ABI_AMD64;
	p[5] = 0;
	p[6] = (unsigned char)-8;
	p[7] = 0;
	u32 = 1;
	memcpy(p + 8, &u32, 4);
	memcpy(p + 12, &nr_fres, 4);
	u32 = fre_len;
	memcpy(p + 16, &u32, 4);
	u32 = 0;
	memcpy(p + 20, &u32, 4);
	u32 = SFRAME_FDE_V2_SIZE;
	memcpy(p + 24, &u32, 4);
	p += SFRAME_HDR_SIZE;
	start = (long)code - (long)p;
	memcpy(p, &start, 4);
	u32 = WORST_CODE_SIZE;
	memcpy(p + 4, &u32, 4);
	u32 = 0;
	memcpy(p + 8, &u32, 4);
	memcpy(p + 12, &nr_fres, 4);
	p[16] = FRE_TYPE_ADDR4;
	p += SFRAME_FDE_V2_SIZE;
	p = worst_fre(p, 0, 8, 0);
	p = worst_fre(p, 1, 16, -16);
	/* One row per stretch of the body, all the same rule. */
	for (i = 0; i < body_rows; i++)
		p = worst_fre(p, 7 + i * ((tail - 7) / body_rows), 24, -16);
	p = worst_fre(p, tail + WORST_POP, 16, -16);
	p = worst_fre(p, tail + WORST_POP + 1, 8, 0);
	ASSERT_EQ(table_size, (size_t)(p - table));

	ASSERT_EQ(0, mprotect(code, WORST_CODE_SIZE, PROT_READ | PROT_EXEC))
		TH_LOG("mprotect: %s", strerror(errno));
	ASSERT_EQ(0, sframe_add((unsigned long)table, table_size, (unsigned long)code,
				WORST_CODE_SIZE))
		TH_LOG("the worst table, refused: %s", strerror(errno));

	t0 = now();
	ret = ((long (*)(long, sframe_cb, void *))(uintptr_t)code)(WORST_DEPTH, cb_walk, &w);
	t1 = now();
	ASSERT_EQ(0, ret) TH_LOG("the request: %s", strerror(-ret));
	ASSERT_EQ(0, w.req.steps[0].ret);
	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	TH_LOG("a walk through %d frames of one function of %d rows: %u entries, %u reads, %.1f ms",
	       WORST_DEPTH, (int)nr_fres, res.nr, res.reads, (t1 - t0) * 1e3);
	/* Its budget ended the walk, well before the recursion did. */
	EXPECT_EQ(WORST_MAX_READS, res.reads)
		TH_LOG("expected the walk to spend its %d reads of user memory, seen %u",
		       WORST_MAX_READS, res.reads);
	EXPECT_GT(10, res.nr) TH_LOG("expected the walk cut short, seen %u entries", res.nr);
	/*
	 * With what it found: the system call, the callback, then the
	 * recursion's frames, each some 8,000 reads.
	 */
	ASSERT_LE(4, res.nr) TH_LOG("expected 4 entries or more, seen %u", res.nr);
	EXPECT_EQ((__u64)w.c.ret[0], res.entries[1]);
	EXPECT_EQ((__u64)(uintptr_t)(code + tail + WORST_CB_RET), res.entries[2]);
	EXPECT_EQ((__u64)w.cb_ret, res.entries[2]);
	/* deep(0)'s caller, deep(1), called from the even site. */
	EXPECT_EQ((__u64)(uintptr_t)(code + tail + WORST_CALL_EVEN + 5), res.entries[3]);
	if (res.nr > 4)
		EXPECT_EQ((__u64)(uintptr_t)(code + tail + WORST_CALL_ODD + 5),
			  res.entries[4]);

	sframe_remove((unsigned long)code);
	munmap(map, map_size);
}

/*
 * Random damage to a good table: registered or refused, every walk ends,
 * starts at the right IP and stays within its bounds. The damage repeats:
 * seed 1, or SFRAME_FUZZ_SEED from the environment (printed either way).
 */
TEST_F(sframe, fuzzed_tables_never_hang_or_crash)
{
	const char *env = getenv("SFRAME_FUZZ_SEED");
	unsigned int seed = env ? strtoul(env, NULL, 0) : 1;
	unsigned int accepted = 0, ended = 0, whole = 0;
	struct udt_result res;
	struct call_jit cj;
	struct cb_walk w;
	int round, n, ret;

	TH_LOG("seed %u (SFRAME_FUZZ_SEED=%u replays it)", seed, seed);
	srand(seed);
	for (round = 0; round < FUZZ_ROUNDS; round++) {
		size_t size;

		size = jit_table(&self->jit, rand() % 3 ? 2 : 1, rand() % 2,
				 self->jit.table);
		for (n = rand() % 4 + 1; n > 0; n--)
			self->jit.table[rand() % size] = rand();
		if (!(rand() % 8))
			size = rand() % (size + 1);
		ret = jit_add(&self->jit, size);
		if (ret) {
			EXPECT_TRUE(ret == -EINVAL || ret == -EFAULT)
				TH_LOG("round %d: refused with %d", round, ret);
			continue;
		}
		accepted++;
		ASSERT_EQ(0, walk_jit(&self->jit, self->fd, &w, &cj, &res));
		EXPECT_EQ((__u64)(unsigned long)sframe_syscall_ip, res.entries[0]);
		EXPECT_GE(512U, res.nr);
		ended += res.nr <= 3;
		whole += res.nr >= 5;
		ASSERT_EQ(0, sframe_remove((unsigned long)self->jit.code));
	}
	TH_LOG("%d rounds: %u tables accepted, %u walks ended at the damaged frame, %u went on",
	       FUZZ_ROUNDS, accepted, ended, whole);
	EXPECT_LT(0, accepted);
}

TEST_HARNESS_MAIN
