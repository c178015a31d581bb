/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the SFrame selftests (sframe_test.c, sframe_*_test.c) share. They
 * and sframe_lib.so are built with SFrame (-Wa,--gsframe) and without
 * frame pointers (see Makefile), and the system call that asks for a
 * walk is made with the frame pointer register zeroed: a walk by frame
 * pointers stops at the first frame, one by the tables finds every frame
 * of the chain (sframe_chain.h). Here: the SFrame format as the tests
 * write it; walks of the chain and their checks; the tables of the
 * program and its libraries (their program headers) and prctl(PR_SFRAME);
 * generated code, its tables of versions 1 to 3 and walks through it;
 * the fixture, which opens the hook and maps the generated code.
 * Define _GNU_SOURCE, and include kselftest_harness.h, udt_hook.h and
 * sframe_chain.h before it.
 */
#ifndef UNWIND_DEFERRED_SFRAME_TEST_H
#define UNWIND_DEFERRED_SFRAME_TEST_H

#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/prctl.h>

#ifndef PT_GNU_SFRAME
#define PT_GNU_SFRAME		0x6474e554
#endif

/* The SFrame format, as the tables the tests write use it. */
#define SFRAME_MAGIC		0xdee2
#define SFRAME_F_FDE_SORTED	0x1
#define SFRAME_F_FRAME_POINTER	0x2
#define SFRAME_F_PCREL		0x4
#define SFRAME_ABI_AMD64	3
#define SFRAME_HDR_SIZE		28
#define SFRAME_FDE_V1_SIZE	17
#define SFRAME_FDE_V2_SIZE	20
/* An FRE of one-byte start and offsets: CFA = SP + off, RA at CFA - 8. */
#define FRE_INFO(nr_off)	(1 | (nr_off) << 1)

static inline pid_t sys_gettid(void)
{
	return syscall(SYS_gettid);
}

static inline double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One walk of the chain: the hook's consumer 0 asks, in task context. */
static inline long walk_chain(int fd, struct chain *c, struct udt_result *res)
{
	struct udt_request req = { };
	struct chain_call cc = {
		.nr = __NR_ioctl, .a1 = fd, .a2 = UDT_IOC_REQUEST, .a3 = (long)&req,
	};
	long ret;

	add_step(&req, 0, UDT_CTX_TASK);
	ret = chain_1(c, &cc);
	if (ret)
		return ret;
	if (req.steps[0].ret)
		return req.steps[0].ret;
	return get_result(fd, 0, res) ? -errno : 0;
}

/*
 * Entries 0..nr-1 of the walk must be want[0..nr-1], and the walk no
 * shorter than nr (exact: nor longer).
 */
static inline void expect_walk(struct __test_metadata *_metadata,
			       const struct udt_result *res, const unsigned long *want,
			       unsigned int nr, bool exact, const char *what)
{
	unsigned int i;

	if (exact) {
		EXPECT_EQ(nr, res->nr)
			TH_LOG("%s: expected a walk of exactly %u entries, seen %u",
			       what, nr, res->nr);
	} else {
		EXPECT_LE(nr, res->nr)
			TH_LOG("%s: expected a walk of at least %u entries, seen %u",
			       what, nr, res->nr);
	}
	for (i = 0; i < nr && i < res->nr; i++)
		EXPECT_EQ((__u64)want[i], res->entries[i])
			TH_LOG("%s: entries[%u]: expected %#lx, seen %#llx", what,
			       i, want[i], (unsigned long long)res->entries[i]);
}

/* The first n entries of the chain's walk. */
static inline void chain_want(const struct chain *c, unsigned long *want)
{
	want[0] = (unsigned long)sframe_syscall_ip;
	want[1] = c->ret[0];
	want[2] = c->ret[1];
	want[3] = c->ret[2];
}

/**
 * struct geometry - an object's table and code, as its program headers say
 * @sframe_start: its PT_GNU_SFRAME segment in memory, 0 if it has none
 * @sframe_size: its size
 * @text_start: its executable PT_LOAD segment
 * @text_size: its size
 */
struct geometry {
	unsigned long sframe_start, sframe_size, text_start, text_size;
};

struct find_object {
	const char *name;	/* "" for the program */
	struct geometry *g;
};

static inline int find_object_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_object *f = data;
	const char *name = info->dlpi_name ? info->dlpi_name : "";
	int i;

	if (*f->name ? !strstr(name, f->name) : *name)
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		unsigned long start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
		unsigned long size = info->dlpi_phdr[i].p_memsz;

		if (info->dlpi_phdr[i].p_type == PT_GNU_SFRAME) {
			f->g->sframe_start = start;
			f->g->sframe_size = size;
		}
		if (info->dlpi_phdr[i].p_type == PT_LOAD &&
		    (info->dlpi_phdr[i].p_flags & PF_X)) {
			f->g->text_start = start;
			f->g->text_size = size;
		}
	}
	return 1;
}

static inline void find_object(const char *name, struct geometry *g)
{
	struct find_object f = { .name = name, .g = g };

	memset(g, 0, sizeof(*g));
	dl_iterate_phdr(find_object_cb, &f);
}

static inline int sframe_add(unsigned long sframe_start, unsigned long sframe_size,
			     unsigned long text_start, unsigned long text_size)
{
	struct prctl_sframe arg = {
		.sframe_start	= sframe_start,
		.sframe_size	= sframe_size,
		.text_start	= text_start,
		.text_size	= text_size,
	};

	return prctl(PR_SFRAME, PR_SFRAME_ADD, &arg, sizeof(arg), 0) ? -errno : 0;
}

static inline int sframe_remove(unsigned long text_start)
{
	return prctl(PR_SFRAME, PR_SFRAME_REMOVE, text_start, 0, 0) ? -errno : 0;
}

/*
 * Generated code: jit(cb, arg) calls cb(arg) from a frame of its own,
 * where it saved %rbp and zeroed it. Without its table, the walk steps
 * over it by frame pointer, zero, and ends there.
 */
static const unsigned char jit_code[] = {
	0x55,				/* 0x00: push %rbp */
	0x31, 0xed,			/* 0x01: xor  %ebp,%ebp */
	0x48, 0x83, 0xec, 0x20,		/* 0x03: sub  $0x20,%rsp */
	0x48, 0x89, 0xf8,		/* 0x07: mov  %rdi,%rax */
	0x48, 0x89, 0xf7,		/* 0x0a: mov  %rsi,%rdi */
	0xff, 0xd0,			/* 0x0d: call *%rax */
	0x48, 0x83, 0xc4, 0x20,		/* 0x0f: add  $0x20,%rsp */
	0x5d,				/* 0x13: pop  %rbp */
	0xc3,				/* 0x14: ret */
};

#define JIT_RET		0x0f	/* the return address of its call */

/*
 * Its rows, from each start on: the CFA as an offset from %rsp, and where
 * %rbp is saved, as an offset from the CFA (0: not saved).
 */
static const struct { unsigned char start, cfa; signed char fp; } jit_rows[] = {
	{ 0x00, 0x08, 0 }, { 0x01, 0x10, -16 }, { 0x07, 0x30, -16 },
	{ 0x13, 0x10, -16 }, { 0x14, 0x08, 0 },
};

/* The row of the call (0x0d). */
#define JIT_CALL_ROW	2

typedef long (*sframe_cb)(void *arg);
typedef long (*jit_fn)(sframe_cb cb, void *arg);

/* The code and its table, each on pages of their own. */
struct jit {
	unsigned char *code;
	unsigned char *table;
	size_t table_size;
	size_t page;
};

/* The bytes of the FREs: start, info, one or two offsets each. */
static inline size_t jit_fre_len(void)
{
	size_t i, len = 0;

	for (i = 0; i < ARRAY_SIZE(jit_rows); i++)
		len += jit_rows[i].fp ? 4 : 3;
	return len;
}

/* Where FRE n starts in a version 2 table. */
static inline size_t v2_fre(size_t n)
{
	size_t i, at = SFRAME_HDR_SIZE + SFRAME_FDE_V2_SIZE;

	for (i = 0; i < n; i++)
		at += jit_rows[i].fp ? 4 : 3;
	return at;
}

/*
 * Write a table of version 1 or 2 (PC-relative function starts or not)
 * for the generated code; returns its size.
 */
static inline size_t jit_table(const struct jit *j, int version, bool pcrel,
			       unsigned char *t)
{
	size_t fde_size = version == 1 ? SFRAME_FDE_V1_SIZE : SFRAME_FDE_V2_SIZE;
	size_t nr = ARRAY_SIZE(jit_rows), i, at;
	unsigned long fde = (unsigned long)j->table + SFRAME_HDR_SIZE;
	unsigned char *p = t;
	int32_t start;
	uint32_t u32;
	uint16_t u16;

	memset(t, 0, j->page);
	u16 = SFRAME_MAGIC;
	memcpy(p, &u16, 2);
	p[2] = version;
	p[3] = SFRAME_F_FDE_SORTED | (pcrel ? SFRAME_F_PCREL : 0);
	p[4] = SFRAME_ABI_AMD64;
	p[5] = 0;		/* the FP offset: in each row */
	p[6] = (unsigned char)-8;	/* the return address: at CFA - 8 */
	p[7] = 0;
	u32 = 1;		/* FDEs */
	memcpy(p + 8, &u32, 4);
	u32 = nr;		/* FREs */
	memcpy(p + 12, &u32, 4);
	u32 = jit_fre_len();	/* their bytes */
	memcpy(p + 16, &u32, 4);
	u32 = 0;		/* FDEs right after the header */
	memcpy(p + 20, &u32, 4);
	u32 = fde_size;		/* FREs right after them */
	memcpy(p + 24, &u32, 4);

	p += SFRAME_HDR_SIZE;
	start = (long)j->code - (long)(pcrel ? fde : (unsigned long)j->table);
	memcpy(p, &start, 4);
	u32 = sizeof(jit_code);
	memcpy(p + 4, &u32, 4);
	u32 = 0;
	memcpy(p + 8, &u32, 4);
	u32 = nr;
	memcpy(p + 12, &u32, 4);
	p[16] = 0;		/* one-byte FRE starts, PCINC */

	at = SFRAME_HDR_SIZE + fde_size;
	for (i = 0; i < nr; i++) {
		t[at++] = jit_rows[i].start;
		t[at++] = FRE_INFO(jit_rows[i].fp ? 2 : 1);
		t[at++] = jit_rows[i].cfa;
		if (jit_rows[i].fp)
			t[at++] = jit_rows[i].fp;
	}
	return at;
}

static inline void jit_setup(struct __test_metadata *_metadata, struct jit *j)
{
	j->page = sysconf(_SC_PAGESIZE);
	/* Near each other: an FDE reaches its function with 32 bits. */
	j->code = mmap(NULL, 3 * j->page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, j->code) TH_LOG("mmap: %s", strerror(errno));
	j->table = j->code + j->page;
	/* The page after the table stays inaccessible. */
	ASSERT_EQ(0, mprotect(j->table + j->page, j->page, PROT_NONE));
	memcpy(j->code, jit_code, sizeof(jit_code));
	ASSERT_EQ(0, mprotect(j->code, j->page, PROT_READ | PROT_EXEC))
		TH_LOG("mprotect: %s", strerror(errno));
	j->table_size = jit_table(j, 2, true, j->table);
}

static inline void jit_teardown(struct jit *j)
{
	if (j->code && j->code != MAP_FAILED)
		munmap(j->code, 3 * j->page);
}

static inline int jit_add(const struct jit *j, size_t size)
{
	return sframe_add((unsigned long)j->table, size, (unsigned long)j->code,
			  sizeof(jit_code));
}

/* What the callback does: record its return address, walk the chain. */
struct cb_walk {
	int fd;
	__u32 wait;		/* block in the hook after the request */
	struct chain c;
	unsigned long cb_ret;
	struct udt_request req;
};

static __attribute__((noipa, unused)) long cb_walk(void *arg)
{
	struct cb_walk *w = arg;
	unsigned long frame[5];		/* a frame of its own */
	long ret;

	asm volatile("" : : "r" (frame) : "memory");
	w->cb_ret = (unsigned long)__builtin_return_address(0);
	memset(&w->req, 0, sizeof(w->req));
	add_step(&w->req, 0, UDT_CTX_TASK);
	w->req.wait_after = w->wait;
	ret = sframe_syscall(__NR_ioctl, w->fd, UDT_IOC_REQUEST, (long)&w->req,
			     &w->c.ret[0]);
	asm volatile("" : : "r" (frame) : "memory");	/* not a tail call */
	return ret;
}

/* The generated code's caller: its own return address is want[4]. */
struct call_jit {
	jit_fn fn;
	unsigned long ret;
};

static __attribute__((noipa, unused)) long call_jit(struct call_jit *cj, struct cb_walk *w)
{
	long ret;

	cj->ret = (unsigned long)__builtin_return_address(0);
	ret = cj->fn(cb_walk, w);
	asm volatile("" : : : "memory");
	return ret;
}

/* Walk through the generated code: 0 and *res, or an errno. */
static inline long walk_jit(const struct jit *j, int fd, struct cb_walk *w,
			    struct call_jit *cj, struct udt_result *res)
{
	long ret;

	memset(w, 0, sizeof(*w));
	w->fd = fd;
	cj->fn = (jit_fn)(uintptr_t)j->code;
	ret = call_jit(cj, w);
	if (ret)
		return ret;
	if (w->req.steps[0].ret)
		return w->req.steps[0].ret;
	return get_result(fd, 0, res) ? -errno : 0;
}

/* The first entries of a walk through the generated code. */
static inline unsigned int jit_want(const struct jit *j, const struct cb_walk *w,
				    const struct call_jit *cj, unsigned long *want)
{
	want[0] = (unsigned long)sframe_syscall_ip;
	want[1] = w->c.ret[0];
	want[2] = w->cb_ret;		/* in the generated code */
	want[3] = 0;			/* in call_jit(): checked by range */
	want[4] = cj->ret;
	return 5;
}

/* The whole walk through the generated code, to its caller's caller. */
static inline void expect_jit_walk(struct __test_metadata *_metadata,
				   const struct jit *j, const struct cb_walk *w,
				   const struct call_jit *cj,
				   const struct udt_result *res, const char *what)
{
	unsigned long want[5];

	jit_want(j, w, cj, want);
	EXPECT_EQ((unsigned long)j->code + JIT_RET, w->cb_ret);
	expect_walk(_metadata, res, want, 3, false, what);
	EXPECT_LE(5, res->nr) TH_LOG("%s: expected 5 entries or more, seen %u",
				     what, res->nr);
	if (res->nr < 5)
		return;
	EXPECT_TRUE(res->entries[3] > (unsigned long)call_jit &&
		    res->entries[3] < (unsigned long)call_jit + 256)
		TH_LOG("%s: entries[3]: expected in call_jit() at %p, seen %#llx",
		       what, call_jit, (unsigned long long)res->entries[3]);
	EXPECT_EQ((__u64)want[4], res->entries[4])
		TH_LOG("%s: entries[4]: expected %#lx, call_jit()'s return address, seen %#llx",
		       what, want[4], (unsigned long long)res->entries[4]);
}

/* The walk ends at the generated code's frame: exactly its first 3 entries. */
static inline void expect_jit_stop(struct __test_metadata *_metadata,
				   const struct jit *j, const struct cb_walk *w,
				   const struct call_jit *cj,
				   const struct udt_result *res, const char *what)
{
	unsigned long want[5];

	jit_want(j, w, cj, want);
	expect_walk(_metadata, res, want, 3, true, what);
}

/*
 * Version 3 tables of generated code: DEFAULT and FLEX functions, the
 * outermost-frame mark, and a signal restorer (sframe_v3_test.c).
 */
#define SFRAME_FDE_V3_SIZE	16
#define SFRAME_FDA_V3_SIZE	5
#define V3_FDE_SIGNAL		0x80
#define V3_FDE_TYPE_FLEX	1
/* FLEX control words: register (DWARF %rbp 6, %rsp 7) or CFA, dereferenced */
#define FLEX_CTL(reg, deref, reg_p)	((reg) << 3 | (deref) << 1 | (reg_p))
#define FLEX_CFA_RSP(deref)	FLEX_CTL(7, deref, 1)
#define FLEX_AT_CFA		FLEX_CTL(0, 1, 0)
#define FLEX_AT_RBP		FLEX_CTL(6, 1, 1)

/*
 * A row of a version 3 table, from @start on: the CFA is %rsp + @cfa (the
 * word there with @cfa_deref); %rbp is saved at CFA + @fp (at %rbp + @fp
 * with @fp_at_rbp), not saved when both are 0; @outermost: no data words.
 */
struct v3_row {
	unsigned char start;
	signed char cfa, fp;
	bool cfa_deref, fp_at_rbp, outermost;
};

/*
 * Write at @t (in memory at @t_addr) a version 3 table of one function at
 * @code of @size bytes with @rows, its data words DEFAULT or FLEX, or a
 * signal restorer without rows; returns its size.
 */
static inline size_t v3_table(unsigned char *t, unsigned long t_addr,
			      unsigned long code, uint32_t size, bool flex,
			      bool signal, const struct v3_row *rows, size_t nr)
{
	size_t at = SFRAME_HDR_SIZE + SFRAME_FDE_V3_SIZE + SFRAME_FDA_V3_SIZE;
	int64_t start = (int64_t)(code - (t_addr + SFRAME_HDR_SIZE));
	uint32_t u32;
	uint16_t u16;
	size_t i;

	memset(t, 0, 1024);
	u16 = SFRAME_MAGIC;
	memcpy(t, &u16, 2);
	t[2] = 3;
	t[3] = SFRAME_F_FDE_SORTED | SFRAME_F_PCREL;
	t[4] = SFRAME_ABI_AMD64;
	t[6] = (unsigned char)-8;	/* the return address: at CFA - 8 */
	u32 = 1;
	memcpy(t + 8, &u32, 4);
	u32 = nr;
	memcpy(t + 12, &u32, 4);
	u32 = SFRAME_FDE_V3_SIZE;	/* FREs right after the FDE */
	memcpy(t + 24, &u32, 4);

	/* the FDE: start (from the field), size, its record at FRE offset 0 */
	memcpy(t + SFRAME_HDR_SIZE, &start, 8);
	memcpy(t + SFRAME_HDR_SIZE + 8, &size, 4);
	/* the function's record: FREs, info, info2, rep_size */
	u16 = nr;
	memcpy(t + SFRAME_HDR_SIZE + SFRAME_FDE_V3_SIZE, &u16, 2);
	t[SFRAME_HDR_SIZE + SFRAME_FDE_V3_SIZE + 2] = signal ? V3_FDE_SIGNAL : 0;
	t[SFRAME_HDR_SIZE + SFRAME_FDE_V3_SIZE + 3] = flex ? V3_FDE_TYPE_FLEX : 0;

	for (i = 0; i < nr; i++) {
		const struct v3_row *r = &rows[i];
		bool fp = r->fp || r->fp_at_rbp;

		t[at++] = r->start;
		if (r->outermost) {
			t[at++] = 0;
			continue;
		}
		if (!flex) {
			t[at++] = FRE_INFO(fp ? 2 : 1);
			t[at++] = r->cfa;
			if (fp)
				t[at++] = r->fp;
			continue;
		}
		/* CFA pair; then a padding word for the RA and the FP pair */
		t[at++] = (fp ? 5 : 2) << 1;
		t[at++] = FLEX_CFA_RSP(r->cfa_deref);
		t[at++] = r->cfa;
		if (fp) {
			t[at++] = 0;
			t[at++] = r->fp_at_rbp ? FLEX_AT_RBP : FLEX_AT_CFA;
			t[at++] = r->fp;
		}
	}
	u32 = at - SFRAME_HDR_SIZE - SFRAME_FDE_V3_SIZE;
	memcpy(t + 16, &u32, 4);
	return at;
}

/* jit_rows as a version 3 table: the call row outermost if asked. */
static inline size_t jit_v3_table(const struct jit *j, bool flex, int outermost_row)
{
	struct v3_row rows[ARRAY_SIZE(jit_rows)];
	size_t i;

	memset(rows, 0, sizeof(rows));
	for (i = 0; i < ARRAY_SIZE(jit_rows); i++) {
		rows[i].start = jit_rows[i].start;
		rows[i].cfa = jit_rows[i].cfa;
		rows[i].fp = jit_rows[i].fp;
		rows[i].outermost = (int)i == outermost_row;
	}
	return v3_table(j->table, (unsigned long)j->table,
			(unsigned long)j->code, sizeof(jit_code), flex, false,
			rows, ARRAY_SIZE(rows));
}

FIXTURE(sframe) {
	int fd;
	struct geometry prog;
	bool prog_removed;
	struct jit jit;
};

FIXTURE_SETUP(sframe)
{
	self->fd = -1;
	find_object("", &self->prog);
	if (!self->prog.sframe_start)
		SKIP(return, "no PT_GNU_SFRAME in this program (its assembler lacks --gsframe?)");
	ASSERT_NE(0, self->prog.text_start);
	jit_setup(_metadata, &self->jit);
	setup_hook(_metadata, &self->fd);
}

FIXTURE_TEARDOWN(sframe)
{
	teardown_hook(self->fd);
	jit_teardown(&self->jit);
	if (self->prog_removed)
		sframe_add(self->prog.sframe_start, self->prog.sframe_size,
			   self->prog.text_start, self->prog.text_size);
}

#endif /* UNWIND_DEFERRED_SFRAME_TEST_H */
