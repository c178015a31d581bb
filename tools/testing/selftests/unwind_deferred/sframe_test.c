// SPDX-License-Identifier: GPL-2.0
/*
 * SFrame tables in the deferred user stack walk, driven through the test
 * hook of lib/test_unwind_deferred.c. This program and sframe_lib.so are
 * built with SFrame (-Wa,--gsframe) and without frame pointers, and the
 * system call that asks for a walk is made with the frame pointer
 * register zeroed: a walk by frame pointers stops at the first frame, one
 * by the tables finds every frame of the chain. Tables of the program
 * (found at exec), of a library (found when dlopen() maps it, from a file
 * system or a memfd), of code the test generates (prctl(PR_SFRAME)), in
 * versions 1 and 2; removed,
 * rejected, damaged and fuzzed tables; tables and code unmapped while a
 * walk is pending; fork.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <linux/prctl.h>

#include "../kselftest_harness.h"
#include "udt_hook.h"
#include "sframe_chain.h"

#ifndef PT_GNU_SFRAME
#define PT_GNU_SFRAME		0x6474e554
#endif

/* The SFrame format, as the tables this test writes use it. */
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

#define FUZZ_ROUNDS		3000
#define WAIT_SECONDS		10.0

static pid_t sys_gettid(void)
{
	return syscall(SYS_gettid);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One walk of the chain: the hook's consumer 0 asks, in task context. */
static long walk_chain(int fd, struct chain *c, struct udt_result *res)
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
static void expect_walk(struct __test_metadata *_metadata,
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
static void chain_want(const struct chain *c, unsigned long *want)
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

static int find_object_cb(struct dl_phdr_info *info, size_t size, void *data)
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

static void find_object(const char *name, struct geometry *g)
{
	struct find_object f = { .name = name, .g = g };

	memset(g, 0, sizeof(*g));
	dl_iterate_phdr(find_object_cb, &f);
}

static int sframe_add(unsigned long sframe_start, unsigned long sframe_size,
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

static int sframe_remove(unsigned long text_start)
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
static size_t jit_fre_len(void)
{
	size_t i, len = 0;

	for (i = 0; i < ARRAY_SIZE(jit_rows); i++)
		len += jit_rows[i].fp ? 4 : 3;
	return len;
}

/* Where FRE n starts in a version 2 table. */
static size_t v2_fre(size_t n)
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
static size_t jit_table(const struct jit *j, int version, bool pcrel,
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

/* The FDE in a version 2 table of jit_table(). */
#define V2_FDE		SFRAME_HDR_SIZE

static void jit_setup(struct __test_metadata *_metadata, struct jit *j)
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

static void jit_teardown(struct jit *j)
{
	if (j->code && j->code != MAP_FAILED)
		munmap(j->code, 3 * j->page);
}

static int jit_add(const struct jit *j, size_t size)
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

static NOIPA long cb_walk(void *arg)
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

static NOIPA long call_jit(struct call_jit *cj, struct cb_walk *w)
{
	long ret;

	cj->ret = (unsigned long)__builtin_return_address(0);
	ret = cj->fn(cb_walk, w);
	asm volatile("" : : : "memory");
	return ret;
}

/* Walk through the generated code: 0 and *res, or an errno. */
static long walk_jit(const struct jit *j, int fd, struct cb_walk *w,
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
static unsigned int jit_want(const struct jit *j, const struct cb_walk *w,
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
static void expect_jit_walk(struct __test_metadata *_metadata,
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
static void expect_jit_stop(struct __test_metadata *_metadata,
			    const struct jit *j, const struct cb_walk *w,
			    const struct call_jit *cj,
			    const struct udt_result *res, const char *what)
{
	unsigned long want[5];

	jit_want(j, w, cj, want);
	expect_walk(_metadata, res, want, 3, true, what);
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

TEST_F(sframe, program_table_found_at_exec)
{
	unsigned long want[4];
	struct udt_result res;
	struct chain c;

	ASSERT_EQ(0, walk_chain(self->fd, &c, &res));
	EXPECT_EQ(sys_gettid(), res.tid);
	chain_want(&c, want);
	expect_walk(_metadata, &res, want, 4, false, "the chain, by the program's table");
}

TEST_F(sframe, frame_pointers_alone_stop_at_the_first_frame)
{
	unsigned long want[4];
	struct udt_result res;
	struct chain c;

	/* The table found at exec goes: its code is walked by %rbp, zeroed. */
	ASSERT_EQ(0, sframe_remove(self->prog.text_start));
	self->prog_removed = true;
	EXPECT_EQ(-ENOENT, sframe_remove(self->prog.text_start));
	ASSERT_EQ(0, walk_chain(self->fd, &c, &res));
	chain_want(&c, want);
	expect_walk(_metadata, &res, want, 1, true, "no table: frame pointers only");

	/* Registered again, by hand: the whole chain again. */
	ASSERT_EQ(0, sframe_add(self->prog.sframe_start, self->prog.sframe_size,
				self->prog.text_start, self->prog.text_size));
	self->prog_removed = false;
	ASSERT_EQ(0, walk_chain(self->fd, &c, &res));
	chain_want(&c, want);
	expect_walk(_metadata, &res, want, 4, false, "the program's table, registered");
}

/* The path of sframe_lib.so, next to this program, in @path. */
static void lib_path(struct __test_metadata *_metadata, char *path, size_t size)
{
	char *slash;
	ssize_t n;

	n = readlink("/proc/self/exe", path, size - 32);
	ASSERT_LT(0, n);
	path[n] = 0;
	slash = strrchr(path, '/');
	ASSERT_NE(NULL, slash);
	snprintf(slash + 1, size - (slash + 1 - path), "sframe_lib.so");
}

/*
 * dlopen() @path, the library, and walk through it by its table, found
 * when its code was mapped; dlclose() takes the table away.
 */
static void walk_library(struct __test_metadata *_metadata, int fd,
			 const char *path)
{
	unsigned long lib_ret[2], want[5];
	long (*lib_call)(sframe_cb cb, void *arg, unsigned long *ret);
	struct udt_result res;
	struct geometry lib;
	struct cb_walk w = { .fd = fd };
	void *handle;

	handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ASSERT_NE(NULL, handle) TH_LOG("dlopen(%s): %s", path, dlerror());
	lib_call = dlsym(handle, "sframe_lib_call");
	ASSERT_NE(NULL, lib_call);
	find_object(path, &lib);
	ASSERT_NE(0, lib.sframe_start) TH_LOG("%s has no PT_GNU_SFRAME", path);

	/* test -> lib_call -> lib_inner -> cb_walk -> sframe_syscall */
	ASSERT_EQ(0, lib_call(cb_walk, &w, lib_ret));
	ASSERT_EQ(0, w.req.steps[0].ret);
	ASSERT_EQ(0, get_result(fd, 0, &res));
	want[0] = (unsigned long)sframe_syscall_ip;
	want[1] = w.c.ret[0];
	want[2] = w.cb_ret;
	want[3] = lib_ret[0];
	want[4] = lib_ret[1];
	expect_walk(_metadata, &res, want, 5, false, path);

	/* Its table is there now, and goes when dlclose() unmaps its code. */
	EXPECT_EQ(-EEXIST, sframe_add(lib.sframe_start, lib.sframe_size,
				      lib.text_start, lib.text_size));
	ASSERT_EQ(0, dlclose(handle));
	EXPECT_EQ(-ENOENT, sframe_remove(lib.text_start))
		TH_LOG("%s: the library's table outlived its code", path);
}

TEST_F(sframe, library_table_found_when_mapped)
{
	char path[4096];

	lib_path(_metadata, path, sizeof(path));
	walk_library(_metadata, self->fd, path);
}

/* tmpfs and memfd files have no ->read_folio(): shmem reads their headers. */
TEST_F(sframe, library_table_found_in_a_memfd)
{
	char path[4096], buf[65536];
	int lib, mfd;
	ssize_t n;

	lib_path(_metadata, path, sizeof(path));
	lib = open(path, O_RDONLY);
	ASSERT_LE(0, lib) TH_LOG("%s: %s", path, strerror(errno));
	mfd = memfd_create("sframe_lib.so", MFD_CLOEXEC);
	ASSERT_LE(0, mfd) TH_LOG("memfd_create: %s", strerror(errno));
	while ((n = read(lib, buf, sizeof(buf))) > 0)
		ASSERT_EQ(n, write(mfd, buf, n));
	ASSERT_EQ(0, n);
	close(lib);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	walk_library(_metadata, self->fd, path);
	close(mfd);
}

/*
 * A copy of the library in a memfd, its program headers moved to its end
 * and padded with PT_NULL entries to @phnum; its /proc/self/fd path.
 */
static int lib_with_phnum(struct __test_metadata *_metadata, unsigned int phnum,
			  char *path, size_t size)
{
	static char buf[1 << 20];
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	Elf64_Phdr *ph;
	ssize_t len;
	size_t at;
	int lib, mfd;

	lib_path(_metadata, path, size);
	lib = open(path, O_RDONLY);
	ASSERT_LE(0, lib) TH_LOG("%s: %s", path, strerror(errno));
	len = read(lib, buf, sizeof(buf));
	close(lib);
	ASSERT_LT((ssize_t)sizeof(*eh), len);
	ASSERT_GT((ssize_t)sizeof(buf) - 8192, len) TH_LOG("%s is too big", path);
	ASSERT_LE(eh->e_phnum, phnum);

	at = (len + 7) & ~7UL;
	ph = (Elf64_Phdr *)(buf + at);
	memset(ph, 0, phnum * sizeof(*ph));
	memcpy(ph, buf + eh->e_phoff, eh->e_phnum * sizeof(*ph));
	eh->e_phoff = at;
	eh->e_phnum = phnum;

	mfd = memfd_create("sframe_lib.so", MFD_CLOEXEC);
	ASSERT_LE(0, mfd) TH_LOG("memfd_create: %s", strerror(errno));
	len = at + phnum * sizeof(*ph);
	ASSERT_EQ(len, write(mfd, buf, len));
	snprintf(path, size, "/proc/self/fd/%d", mfd);
	return mfd;
}

/*
 * The kernel reads 4 KiB of program headers at most, binfmt_elf's own
 * limit, not an allocation of whatever e_phnum says at every mapping:
 * the library with 73 headers of 56 bytes gets its table, with 74 none.
 */
TEST_F(sframe, program_headers_past_a_page_find_no_table)
{
	unsigned int most = 4096 / sizeof(Elf64_Phdr);
	struct geometry lib;
	char path[4096];
	void *handle;
	int mfd;

	mfd = lib_with_phnum(_metadata, most, path, sizeof(path));
	walk_library(_metadata, self->fd, path);
	close(mfd);

	mfd = lib_with_phnum(_metadata, most + 1, path, sizeof(path));
	handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ASSERT_NE(NULL, handle) TH_LOG("dlopen(%s): %s", path, dlerror());
	find_object(path, &lib);
	ASSERT_NE(0, lib.sframe_start) TH_LOG("%s has no PT_GNU_SFRAME", path);
	/* Registered by hand: the kernel had found no table of its own. */
	EXPECT_EQ(0, sframe_add(lib.sframe_start, lib.sframe_size,
				lib.text_start, lib.text_size))
		TH_LOG("want no table found with %u program headers", most + 1);
	EXPECT_EQ(0, sframe_remove(lib.text_start));
	ASSERT_EQ(0, dlclose(handle));
	close(mfd);
}

TEST_F(sframe, generated_code_with_a_registered_table)
{
	static const struct { int version; bool pcrel; } kinds[] = {
		{ 1, false }, { 2, false }, { 2, true },
	};
	struct udt_result res;
	struct call_jit cj;
	struct cb_walk w;
	char what[64];
	size_t i, size;

	for (i = 0; i < ARRAY_SIZE(kinds); i++) {
		snprintf(what, sizeof(what), "version %d%s", kinds[i].version,
			 kinds[i].pcrel ? ", PC-relative" : "");
		size = jit_table(&self->jit, kinds[i].version, kinds[i].pcrel,
				 self->jit.table);
		ASSERT_EQ(0, jit_add(&self->jit, size)) TH_LOG("%s", what);
		ASSERT_EQ(0, walk_jit(&self->jit, self->fd, &w, &cj, &res));
		expect_jit_walk(_metadata, &self->jit, &w, &cj, &res, what);

		ASSERT_EQ(0, sframe_remove((unsigned long)self->jit.code));
		ASSERT_EQ(0, walk_jit(&self->jit, self->fd, &w, &cj, &res));
		expect_jit_stop(_metadata, &self->jit, &w, &cj, &res,
				"table removed: frame pointers, zeroed");
	}
}

/* The kernel's limit of tables registered by one process (sframe.c). */
#define SFRAME_MAX_REGISTERED	4096
#define REGISTER_BATCH		256

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * Register the jit's table for each of @nr pages of code from @code on,
 * the @first-th on: 0 and the median time of one registration in
 * *@median, or -errno.
 */
static int register_pages(const struct jit *j, unsigned char *code,
			  size_t first, size_t nr, double *median)
{
	static double t[REGISTER_BATCH];
	size_t i;
	int ret;

	for (i = 0; i < nr; i++) {
		t[i] = now();
		ret = sframe_add((unsigned long)j->table, j->table_size,
				 (unsigned long)code + (first + i) * j->page,
				 j->page);
		t[i] = now() - t[i];
		if (ret)
			return ret;
	}
	qsort(t, nr, sizeof(t[0]), cmp_double);
	*median = t[nr / 2];
	return 0;
}

/*
 * A process registers SFRAME_MAX_REGISTERED tables at most, each in the
 * same time whatever the number already there (a counter, not a scan of
 * the tree under mmap_lock); one removed makes room for one more.
 */
TEST_F(sframe, registered_tables_are_counted_and_capped)
{
	size_t n = SFRAME_MAX_REGISTERED, page = self->jit.page, i;
	double first = 0, last, t = 0;
	unsigned char *code;
	int ret;

	code = mmap(NULL, (n + 1) * page, PROT_READ | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, code) TH_LOG("mmap: %s", strerror(errno));

	for (i = 0; i < n; i += REGISTER_BATCH) {
		ret = register_pages(&self->jit, code, i, REGISTER_BATCH, &t);
		ASSERT_EQ(0, ret) TH_LOG("registrations from %zu: %s", i + 1,
					 strerror(-ret));
		if (!i)
			first = t;
	}
	last = t;
	TH_LOG("median registration: %.1f us in the first %d, %.1f us in the last %d",
	       first * 1e6, REGISTER_BATCH, last * 1e6, REGISTER_BATCH);
	/*
	 * A scan of 4,000 tables per registration would be many times
	 * slower; medians of 256, against a passing stall of the machine.
	 */
	EXPECT_GE(4 * first, last)
		TH_LOG("want the last registrations about as fast as the first");

	EXPECT_EQ(-ENOSPC, sframe_add((unsigned long)self->jit.table,
				      self->jit.table_size,
				      (unsigned long)code + n * page, page))
		TH_LOG("want table %zu refused", n + 1);
	ASSERT_EQ(0, sframe_remove((unsigned long)code));
	EXPECT_EQ(0, sframe_add((unsigned long)self->jit.table,
				self->jit.table_size,
				(unsigned long)code + n * page, page))
		TH_LOG("want room for a table once one was removed");

	/* Unmapping the code takes every table with it, and their count. */
	ASSERT_EQ(0, munmap(code, (n + 1) * page));
	EXPECT_EQ(-ENOENT, sframe_remove((unsigned long)code + n * page));
	EXPECT_EQ(0, jit_add(&self->jit, self->jit.table_size))
		TH_LOG("want registrations counted down when their code went");
	EXPECT_EQ(0, sframe_remove((unsigned long)self->jit.code));
}

/*
 * Version 3 tables of generated code: DEFAULT and FLEX functions, the
 * outermost-frame mark, and a signal restorer.
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
static size_t v3_table(unsigned char *t, unsigned long t_addr,
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
static size_t jit_v3_table(const struct jit *j, bool flex, int outermost_row)
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

TEST_F(sframe, version_3_tables_default_and_flex)
{
	struct udt_result res;
	struct call_jit cj;
	struct cb_walk w;
	size_t size;
	int flex;

	for (flex = 0; flex < 2; flex++) {
		const char *what = flex ? "version 3, FLEX" : "version 3, DEFAULT";

		size = jit_v3_table(&self->jit, flex, -1);
		ASSERT_EQ(0, jit_add(&self->jit, size)) TH_LOG("%s: %s", what,
							       strerror(errno));
		ASSERT_EQ(0, walk_jit(&self->jit, self->fd, &w, &cj, &res));
		expect_jit_walk(_metadata, &self->jit, &w, &cj, &res, what);
		ASSERT_EQ(0, sframe_remove((unsigned long)self->jit.code));
	}
}

/*
 * The outermost-frame mark: a row without data words, or a DEFAULT
 * function without rows, ends the walk at that frame, where the same
 * table without the mark goes on (version_3_tables_default_and_flex).
 */
TEST_F(sframe, version_3_outermost_frame_ends_the_walk)
{
	struct udt_result res;
	struct call_jit cj;
	struct cb_walk w;
	size_t size;

	size = jit_v3_table(&self->jit, false, JIT_CALL_ROW);
	ASSERT_EQ(0, jit_add(&self->jit, size)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(0, walk_jit(&self->jit, self->fd, &w, &cj, &res));
	expect_jit_stop(_metadata, &self->jit, &w, &cj, &res,
			"the call's row marked outermost");
	ASSERT_EQ(0, sframe_remove((unsigned long)self->jit.code));

	size = v3_table(self->jit.table, (unsigned long)self->jit.table,
			(unsigned long)self->jit.code, sizeof(jit_code), false,
			false, NULL, 0);
	ASSERT_EQ(0, jit_add(&self->jit, size)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(0, walk_jit(&self->jit, self->fd, &w, &cj, &res));
	expect_jit_stop(_metadata, &self->jit, &w, &cj, &res,
			"a DEFAULT function without rows");
	ASSERT_EQ(0, sframe_remove((unsigned long)self->jit.code));
}

/*
 * A frame only FLEX rules describe: at its call the CFA is a word saved
 * at the stack pointer (as after a realignment) and %rbp points at a copy
 * of the caller's %rbp, whose next word is not a return address: a walk
 * by frame pointer goes astray there, one by these rules does not.
 */
static const unsigned char realigned_code[] = {
	0x55,					/* 0x00: push %rbp */
	0x48, 0x83, 0xec, 0x20,			/* 0x01: sub  $0x20,%rsp */
	0x48, 0x8b, 0x44, 0x24, 0x20,		/* 0x05: mov  0x20(%rsp),%rax */
	0x48, 0x89, 0x44, 0x24, 0x08,		/* 0x0a: mov  %rax,0x8(%rsp) */
	0x48, 0x8d, 0x6c, 0x24, 0x08,		/* 0x0f: lea  0x8(%rsp),%rbp */
	0x48, 0xc7, 0x44, 0x24, 0x10,		/* 0x14: movq $1,0x10(%rsp) */
	0x01, 0x00, 0x00, 0x00,
	0x48, 0x8d, 0x44, 0x24, 0x30,		/* 0x1d: lea  0x30(%rsp),%rax */
	0x48, 0x89, 0x04, 0x24,			/* 0x22: mov  %rax,(%rsp) */
	0x48, 0x89, 0xf8,			/* 0x26: mov  %rdi,%rax */
	0x48, 0x89, 0xf7,			/* 0x29: mov  %rsi,%rdi */
	0xff, 0xd0,				/* 0x2c: call *%rax */
	0x48, 0x83, 0xc4, 0x20,			/* 0x2e: add  $0x20,%rsp */
	0x5d,					/* 0x32: pop  %rbp */
	0xc3,					/* 0x33: ret */
};

#define REALIGNED_AT	0x100	/* in the generated code's page */
#define REALIGNED_RET	0x2e

static const struct v3_row realigned_rows[] = {
	{ .start = 0x00, .cfa = 8 },
	{ .start = 0x01, .cfa = 16, .fp = -16 },
	{ .start = 0x05, .cfa = 48, .fp = -16 },
	{ .start = 0x2c, .cfa = 0, .cfa_deref = true, .fp = 0, .fp_at_rbp = true },
	{ .start = 0x2e, .cfa = 48, .fp = -16 },
	{ .start = 0x32, .cfa = 16, .fp = -16 },
	{ .start = 0x33, .cfa = 8 },
};

/* Copy @len bytes of code to @at in the generated code's page. */
static void jit_put(struct __test_metadata *_metadata, const struct jit *j,
		    size_t at, const void *code, size_t len)
{
	ASSERT_EQ(0, mprotect(j->code, j->page, PROT_READ | PROT_WRITE));
	memcpy(j->code + at, code, len);
	ASSERT_EQ(0, mprotect(j->code, j->page, PROT_READ | PROT_EXEC));
}

TEST_F(sframe, version_3_flex_rules_walk_a_realigned_frame)
{
	struct jit j = self->jit;
	struct udt_result res;
	struct call_jit cj;
	struct cb_walk w;
	size_t size;

	jit_put(_metadata, &self->jit, REALIGNED_AT, realigned_code,
		sizeof(realigned_code));
	j.code += REALIGNED_AT;

	/* By frame pointers: the word after the copy is 1, not a return address. */
	ASSERT_EQ(0, walk_jit(&j, self->fd, &w, &cj, &res));
	ASSERT_EQ((unsigned long)j.code + REALIGNED_RET, w.cb_ret);
	EXPECT_FALSE(res.nr >= 5 && res.entries[4] == cj.ret)
		TH_LOG("without its table the walk went through: the test proves nothing");

	size = v3_table(j.table, (unsigned long)j.table, (unsigned long)j.code,
			sizeof(realigned_code), true, false, realigned_rows,
			ARRAY_SIZE(realigned_rows));
	ASSERT_EQ(0, sframe_add((unsigned long)j.table, size,
				(unsigned long)j.code, sizeof(realigned_code)))
		TH_LOG("%s", strerror(errno));
	ASSERT_EQ(0, walk_jit(&j, self->fd, &w, &cj, &res));
	EXPECT_LE(5, res.nr) TH_LOG("expected 5 entries or more, seen %u", res.nr);
	if (res.nr >= 5) {
		EXPECT_EQ((__u64)j.code + REALIGNED_RET, res.entries[2]);
		EXPECT_TRUE(res.entries[3] > (unsigned long)call_jit &&
			    res.entries[3] < (unsigned long)call_jit + 256)
			TH_LOG("entries[3]: expected in call_jit() at %p, seen %#llx",
			       call_jit, (unsigned long long)res.entries[3]);
		EXPECT_EQ((__u64)cj.ret, res.entries[4])
			TH_LOG("entries[4]: expected %#lx, call_jit()'s return address, seen %#llx",
			       cj.ret, (unsigned long long)res.entries[4]);
	}
	ASSERT_EQ(0, sframe_remove((unsigned long)j.code));
}

/*
 * A signal restorer of the generated code, marked as one in its table:
 * the walk from the handler steps from it into the context the signal
 * interrupted, as the signal frame saved it. Its table covers the byte
 * before the restorer too, where the lookup of a return address lands.
 */
static const unsigned char restorer_code[] = {
	0x90,					/* 0x00: nop */
	0xb8, 0x0f, 0x00, 0x00, 0x00,		/* 0x01: mov $15,%eax (rt_sigreturn) */
	0x0f, 0x05,				/* 0x06: syscall */
};

#define RESTORER_AT	0x200
#define SA_RESTORER_FLAG	0x04000000

struct kernel_sigaction {
	void (*handler)(int sig, siginfo_t *info, void *uc);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

struct signal_walk {
	int fd;
	unsigned long rip;		/* where the signal interrupted */
	unsigned long handler_ret;	/* the restorer */
	struct chain c;
	struct udt_request req;
	long ret;
};

static struct signal_walk *signal_walk;

static NOIPA void signal_walk_handler(int sig, siginfo_t *info, void *ucp)
{
	ucontext_t *uc = ucp;
	struct signal_walk *s = signal_walk;

	s->rip = uc->uc_mcontext.gregs[REG_RIP];
	s->handler_ret = (unsigned long)__builtin_return_address(0);
	memset(&s->req, 0, sizeof(s->req));
	add_step(&s->req, 0, UDT_CTX_TASK);
	s->ret = sframe_syscall(__NR_ioctl, s->fd, UDT_IOC_REQUEST,
				(long)&s->req, &s->c.ret[0]);
	asm volatile("" : : : "memory");	/* not a tail call */
}

TEST_F(sframe, version_3_signal_restorer_steps_into_the_interrupted_context)
{
	unsigned char *restorer = self->jit.code + RESTORER_AT;
	unsigned char *table = self->jit.table + 0x400;
	struct kernel_sigaction ksa = {
		.handler	= signal_walk_handler,
		.flags		= SA_SIGINFO | SA_RESTORER_FLAG,
		.restorer	= (void (*)(void))(restorer + 1),
	};
	struct signal_walk s = { .fd = self->fd };
	struct udt_result res;
	size_t size;

	jit_put(_metadata, &self->jit, RESTORER_AT, restorer_code,
		sizeof(restorer_code));
	size = v3_table(table, (unsigned long)table, (unsigned long)restorer,
			sizeof(restorer_code), false, true, NULL, 0);
	ASSERT_EQ(0, sframe_add((unsigned long)table, size,
				(unsigned long)restorer, sizeof(restorer_code)))
		TH_LOG("%s", strerror(errno));
	signal_walk = &s;
	ASSERT_EQ(0, syscall(SYS_rt_sigaction, SIGUSR1, &ksa, NULL, 8))
		TH_LOG("rt_sigaction: %s", strerror(errno));
	ASSERT_EQ(0, syscall(SYS_tgkill, getpid(), sys_gettid(), SIGUSR1));
	signal(SIGUSR1, SIG_DFL);
	ASSERT_EQ(0, s.ret) TH_LOG("the handler's request: %s", strerror(-s.ret));
	ASSERT_EQ(0, s.req.steps[0].ret);
	ASSERT_EQ(0, get_result(self->fd, 0, &res)) TH_LOG("%s", strerror(errno));

	ASSERT_EQ((unsigned long)restorer + 1, s.handler_ret);
	EXPECT_LE(4, res.nr) TH_LOG("expected 4 entries or more, seen %u", res.nr);
	if (res.nr >= 4) {
		EXPECT_EQ((__u64)(unsigned long)sframe_syscall_ip, res.entries[0]);
		EXPECT_EQ((__u64)s.c.ret[0], res.entries[1]);
		EXPECT_EQ((__u64)s.handler_ret, res.entries[2]);
		EXPECT_EQ((__u64)s.rip, res.entries[3])
			TH_LOG("entries[3]: expected %#lx, the interrupted ip, seen %#llx",
			       s.rip, (unsigned long long)res.entries[3]);
	}
	ASSERT_EQ(0, sframe_remove((unsigned long)restorer));
}

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

/* Recurse @depth frames deep through one call site, then walk the chain. */
static NOIPA long recurse(int depth, struct chain *c, const struct chain_call *cc)
{
	unsigned long frame[3];
	long ret;

	asm volatile("" : : "r" (frame) : "memory");
	if (!depth)
		return chain_1(c, cc);
	ret = recurse(depth - 1, c, cc);
	asm volatile("" : : "r" (frame) : "memory");
	return ret;
}

/* A walk of @depth frames of recursion under the chain: its reads. */
static long walk_recursion(struct __test_metadata *_metadata, int fd, int depth,
			   struct udt_result *res)
{
	struct udt_request req = { };
	struct chain_call cc = {
		.nr = __NR_ioctl, .a1 = fd, .a2 = UDT_IOC_REQUEST, .a3 = (long)&req,
	};
	struct chain c;

	add_step(&req, 0, UDT_CTX_TASK);
	ASSERT_EQ(0, recurse(depth, &c, &cc));
	ASSERT_EQ(0, req.steps[0].ret);
	ASSERT_EQ(0, get_result(fd, 0, res));
	EXPECT_LE(depth + 4, res->nr)
		TH_LOG("a recursion %d deep: want its whole walk, seen %u entries",
		       depth, res->nr);
	return res->reads;
}

/*
 * A recursion's frames have the same return address: the walk looks its
 * rule up in the table once, and steps over the other frames with the
 * stack reads alone (sframe_find() keeps the last table, function and
 * rule). Without that, each frame searched the table's functions and
 * read the function's rows again, some ten reads a frame.
 */
TEST_F(sframe, recursion_looks_its_rule_up_once)
{
	struct udt_result res;
	long shallow, deep;

	shallow = walk_recursion(_metadata, self->fd, 8, &res);
	deep = walk_recursion(_metadata, self->fd, 136, &res);
	TH_LOG("walks 8 and 136 frames of recursion deep: %ld and %ld reads",
	       shallow, deep);
	EXPECT_GE(2 * 128, deep - shallow)
		TH_LOG("want at most 2 reads per frame of recursion, seen %.1f",
		       (deep - shallow) / 128.0);
}

/* A walk of the chain from a thread of its own. */
struct chain_thread {
	int fd;
	struct chain c;
	struct udt_result res;
	long ret;
};

static void *chain_thread(void *arg)
{
	struct chain_thread *ct = arg;

	ct->ret = walk_chain(ct->fd, &ct->c, &ct->res);
	return NULL;
}

/*
 * What a walk looked up stays in its mm's cache (sframe_cache.c): a later
 * walk through the same return addresses, by another thread of the
 * process too, reads the stack and no byte of a table. Two threads walk
 * the chain from the same call site, one after the other: the first
 * walk's frames below the threads' own were met by the main thread's
 * walk, the second walk's were all met before. A frame costs at most two
 * reads of the stack (the saved frame pointer and the return address),
 * and so does the step that ends the walk.
 */
TEST_F(sframe, later_walks_of_the_process_read_no_table)
{
	struct chain_thread threads[2] = { { .fd = self->fd }, { .fd = self->fd } };
	struct udt_result res;
	unsigned long want[4];
	struct chain c;
	pthread_t t;
	int i;

	ASSERT_EQ(0, walk_chain(self->fd, &c, &res));
	EXPECT_LT(2 * res.nr, res.reads)
		TH_LOG("the first walk: expected reads of the table too, seen %u for %u entries",
		       res.reads, res.nr);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, pthread_create(&t, NULL, chain_thread, &threads[i]));
		ASSERT_EQ(0, pthread_join(t, NULL));
		ASSERT_EQ(0, threads[i].ret);
		chain_want(&threads[i].c, want);
		expect_walk(_metadata, &threads[i].res, want, 4, false,
			    "a thread's walk of the chain");
	}
	TH_LOG("the main thread's walk: %u entries, %u reads; threads': %u entries, %u, %u reads",
	       res.nr, res.reads, threads[1].res.nr, threads[0].res.reads,
	       threads[1].res.reads);
	EXPECT_EQ(threads[0].res.nr, threads[1].res.nr);
	EXPECT_GE(2 * threads[1].res.nr, threads[1].res.reads)
		TH_LOG("the second thread: expected the stack's reads alone, at most %u, seen %u",
		       2 * threads[1].res.nr, threads[1].res.reads);
}

/*
 * The cache keeps no rule past its table. The generated code's table,
 * walked (its rules cached), is registered again saying that the call's
 * frame is the outermost: the walk ends there. Then the code is mapped
 * over, which takes the table with it: the walk steps over the frame by
 * its frame pointer, zeroed, and ends there too. Each time the good
 * table comes back, the whole walk does.
 */
TEST_F(sframe, cached_rules_go_with_their_table)
{
	int call_info = v2_fre(JIT_CALL_ROW) + 1;
	struct udt_result res;
	struct call_jit cj;
	struct cb_walk w;
	unsigned char *code;

	ASSERT_EQ(0, jit_add(&self->jit, self->jit.table_size));
	ASSERT_EQ(0, walk_jit(&self->jit, self->fd, &w, &cj, &res));
	expect_jit_walk(_metadata, &self->jit, &w, &cj, &res, "the table");

	ASSERT_EQ(0, sframe_remove((unsigned long)self->jit.code));
	self->jit.table[call_info] = FRE_INFO(0);
	ASSERT_EQ(0, jit_add(&self->jit, self->jit.table_size));
	ASSERT_EQ(0, walk_jit(&self->jit, self->fd, &w, &cj, &res));
	expect_jit_stop(_metadata, &self->jit, &w, &cj, &res,
			"registered again, the call's frame outermost");

	ASSERT_EQ(0, sframe_remove((unsigned long)self->jit.code));
	jit_table(&self->jit, 2, true, self->jit.table);
	ASSERT_EQ(0, jit_add(&self->jit, self->jit.table_size));
	ASSERT_EQ(0, walk_jit(&self->jit, self->fd, &w, &cj, &res));
	expect_jit_walk(_metadata, &self->jit, &w, &cj, &res, "the table again");

	code = mmap(self->jit.code, self->jit.page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	ASSERT_EQ(self->jit.code, code) TH_LOG("mmap: %s", strerror(errno));
	memcpy(code, jit_code, sizeof(jit_code));
	ASSERT_EQ(0, mprotect(code, self->jit.page, PROT_READ | PROT_EXEC));
	EXPECT_EQ(-ENOENT, sframe_remove((unsigned long)code))
		TH_LOG("the table outlived the code it described");
	ASSERT_EQ(0, walk_jit(&self->jit, self->fd, &w, &cj, &res));
	expect_jit_stop(_metadata, &self->jit, &w, &cj, &res,
			"the code mapped over: frame pointers, zeroed");

	ASSERT_EQ(0, jit_add(&self->jit, self->jit.table_size));
	ASSERT_EQ(0, walk_jit(&self->jit, self->fd, &w, &cj, &res));
	expect_jit_walk(_metadata, &self->jit, &w, &cj, &res,
			"the new code's table");
	ASSERT_EQ(0, sframe_remove((unsigned long)code));
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

/* The thread of a pending walk: blocks in the hook until released. */
struct pending {
	struct jit *jit;
	int fd;
	pid_t tid;
	struct cb_walk w;
	struct call_jit cj;
	long ret;
};

static void *pending_thread(void *arg)
{
	struct pending *p = arg;

	p->tid = sys_gettid();
	p->w.fd = p->fd;
	p->w.wait = 1;
	p->cj.fn = (jit_fn)(uintptr_t)p->jit->code;
	p->ret = call_jit(&p->cj, &p->w);
	return NULL;
}

/* Wait until tid blocks in the hook; 0, or -1 after WAIT_SECONDS. */
static int wait_blocked(int fd, pid_t *tid)
{
	double deadline = now() + WAIT_SECONDS;
	struct udt_release rel;

	while (now() < deadline) {
		rel = (struct udt_release) {
			.tid = __atomic_load_n(tid, __ATOMIC_ACQUIRE),
			.flags = UDT_RELEASE_PEEK,
		};
		if (rel.tid && !ioctl(fd, UDT_IOC_RELEASE, &rel))
			return 0;
		usleep(1000);
	}
	return -1;
}

static int release(int fd, pid_t tid)
{
	struct udt_release rel = { .tid = tid };

	return ioctl(fd, UDT_IOC_RELEASE, &rel);
}

/*
 * The table is unmapped while a walk through its code is pending: the
 * walk reads fault at that frame, and end there.
 */
TEST_F(sframe, table_unmapped_while_a_walk_is_pending)
{
	struct pending p = { .jit = &self->jit, .fd = self->fd };
	struct udt_result res;
	pthread_t t;

	ASSERT_EQ(0, jit_add(&self->jit, self->jit.table_size));
	ASSERT_EQ(0, pthread_create(&t, NULL, pending_thread, &p));
	ASSERT_EQ(0, wait_blocked(self->fd, &p.tid))
		TH_LOG("the thread did not block in the hook");
	ASSERT_EQ(0, munmap(self->jit.table, self->jit.page));
	ASSERT_EQ(0, release(self->fd, p.tid));
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_EQ(0, p.ret);
	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	EXPECT_EQ(p.tid, res.tid);
	expect_jit_stop(_metadata, &self->jit, &p.w, &p.cj, &res,
			"the table unmapped before the walk");
	/* The table is still registered: its code is. */
	EXPECT_EQ(0, sframe_remove((unsigned long)self->jit.code));
}

/* What the child of code_unmapped_while_a_walk_is_pending reports. */
struct unmapped_report {
	pid_t tid;
	unsigned long want[3];
	int remove_ret;
};

/*
 * The code is unmapped while a walk through it is pending: its table goes
 * with it, so the walk falls back to the frame pointer there and ends
 * (zeroed). The thread then returns into the unmapped code and the child
 * dies of SIGSEGV, which the test expects.
 */
TEST_F(sframe, code_unmapped_while_a_walk_is_pending)
{
	struct unmapped_report *rep;
	struct udt_result res;
	int status, i;
	pid_t child;

	rep = mmap(NULL, sizeof(*rep), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, rep);
	ASSERT_EQ(0, jit_add(&self->jit, self->jit.table_size));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		struct pending p = { .jit = &self->jit, .fd = self->fd };
		pthread_t t;

		if (pthread_create(&t, NULL, pending_thread, &p) ||
		    wait_blocked(self->fd, &p.tid))
			_exit(2);
		rep->tid = p.tid;
		if (munmap(self->jit.code, self->jit.page))
			_exit(3);
		/* Gone with its code. */
		rep->remove_ret = sframe_remove((unsigned long)self->jit.code);
		rep->want[0] = (unsigned long)sframe_syscall_ip;
		rep->want[1] = p.w.c.ret[0];
		rep->want[2] = p.w.cb_ret;
		if (release(self->fd, p.tid))
			_exit(4);
		pthread_join(t, NULL);
		_exit(5);	/* not reached: the thread returns into nothing */
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV)
		TH_LOG("the child should die of SIGSEGV in the unmapped code: status %#x",
		       status);
	EXPECT_EQ(-ENOENT, rep->remove_ret) TH_LOG("the table outlived its code");
	ASSERT_EQ(0, get_result(self->fd, 0, &res));
	EXPECT_EQ(rep->tid, res.tid);
	EXPECT_EQ(3, res.nr) TH_LOG("the walk should end at the unmapped code");
	for (i = 0; i < 3 && i < (int)res.nr; i++)
		EXPECT_EQ((__u64)rep->want[i], res.entries[i])
			TH_LOG("entries[%d]: expected %#lx, seen %#llx", i,
			       rep->want[i], (unsigned long long)res.entries[i]);
	EXPECT_EQ(0, sframe_remove((unsigned long)self->jit.code))
		TH_LOG("the parent's table must stay: only the child unmapped the code");
	munmap(rep, sizeof(*rep));
}

/*
 * A forked child has its parent's tables, registered ones included, but
 * not those of code it does not get (MADV_DONTFORK).
 */
TEST_F(sframe, fork_child_keeps_the_tables)
{
	unsigned char *kept;
	int status;
	pid_t child;

	ASSERT_EQ(0, jit_add(&self->jit, self->jit.table_size));
	kept = mmap(NULL, self->jit.page, PROT_READ | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, kept);
	ASSERT_EQ(0, madvise(kept, self->jit.page, MADV_DONTFORK));
	ASSERT_EQ(0, sframe_add((unsigned long)self->jit.table, self->jit.table_size,
				(unsigned long)kept, 64));
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		unsigned long want[4];
		struct udt_result res;
		struct call_jit cj;
		struct cb_walk w;
		struct chain c;
		unsigned int i;

		if (walk_chain(self->fd, &c, &res) || res.nr < 4)
			_exit(10);
		chain_want(&c, want);
		for (i = 0; i < 4; i++)
			if (res.entries[i] != want[i])
				_exit(11 + i);
		if (walk_jit(&self->jit, self->fd, &w, &cj, &res) || res.nr < 5 ||
		    res.entries[2] != w.cb_ret || res.entries[4] != cj.ret)
			_exit(20);
		if (sframe_remove((unsigned long)kept) != -ENOENT)
			_exit(30);
		_exit(0);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("child: status %#x (10-14: the program's table, 20: the registered one, %s)",
		       status, "30: the table of code not forked");
	EXPECT_EQ(0, sframe_remove((unsigned long)self->jit.code));
	EXPECT_EQ(0, sframe_remove((unsigned long)kept));
	munmap(kept, self->jit.page);
}

/*
 * Through libc, which has no SFrame table: qsort() calls back a function
 * that asks for the walk. In a process that preloads libsframe-eh.so
 * (tools/sframe), libc has a table made from its .eh_frame, and the walk
 * goes through qsort()'s frames to the function that called it.
 */
#define THROUGH_LIBC_ARG	"--sframe-through-libc"

struct through_libc {
	int fd;
	struct chain c;
	unsigned long caller_ret;	/* of sort_caller() */
	struct udt_result res;
	long ret;
};

static struct through_libc through_libc_state, *tl = &through_libc_state;

/*
 * Data that reaches megabytes past the code, as gzip's, python3's and
 * perl's does: a table made for the program must not be placed after it.
 * Not static: the compiler keeps it although nothing reads it.
 */
char sframe_big_data[4 << 20];

static NOIPA int cmp_walk(const void *a, const void *b)
{
	struct udt_request req = { };

	if (!tl->ret) {
		add_step(&req, 0, UDT_CTX_TASK);
		tl->ret = sframe_syscall(__NR_ioctl, tl->fd, UDT_IOC_REQUEST,
					 (long)&req, &tl->c.ret[0]);
		if (!tl->ret)
			tl->ret = get_result(tl->fd, 0, &tl->res) ? -errno : 1;
	}
	return *(const int *)a - *(const int *)b;
}

static NOIPA void sort_caller(void)
{
	int v[2] = { 2, 1 };

	tl->caller_ret = (unsigned long)__builtin_return_address(0);
	qsort(v, 2, sizeof(v[0]), cmp_walk);
	asm volatile("" : : "r" (v) : "memory");
}

/* The child: 0 when the walk found sort_caller()'s caller, 1 when not. */
static int through_libc(void)
{
	unsigned int i;

	tl->fd = open(UDT_PATH, O_RDWR | O_CLOEXEC);
	if (tl->fd < 0)
		return 3;
	sort_caller();
	if (tl->ret != 1 || tl->res.tid != sys_gettid() ||
	    tl->res.entries[0] != (unsigned long)sframe_syscall_ip)
		return 2;
	for (i = 1; i < tl->res.nr && i < UDT_MAX_ENTRIES; i++)
		if (tl->res.entries[i] == tl->caller_ret)
			return 0;
	return 1;
}

/* @path: @name in the directory of this program. */
static int sibling(char *path, size_t size, const char *name)
{
	ssize_t n = readlink("/proc/self/exe", path, size - 1);
	char *slash;

	if (n <= 0)
		return -1;
	path[n] = 0;
	slash = strrchr(path, '/');
	if (!slash || (size_t)(slash + 1 - path) + strlen(name) >= size)
		return -1;
	memcpy(slash + 1, name, strlen(name) + 1);
	return access(path, R_OK | X_OK);
}

/* @exe's through_libc(), with @preload preloaded: its status, or -1. */
/* The child's exit status; libsframe-eh.so writes tables of @version. */
static int run_through_libc(const char *exe, const char *preload, int version)
{
	char env[4200], ver[32];
	int status;
	pid_t pid;

	pid = fork();
	if (!pid) {
		char *argv[3], *envp[3];

		argv[0] = (char *)exe;
		argv[1] = THROUGH_LIBC_ARG;
		argv[2] = NULL;
		envp[0] = env;
		envp[1] = ver;
		envp[2] = NULL;
		snprintf(env, sizeof(env), "LD_PRELOAD=%s", preload ? preload : "");
		snprintf(ver, sizeof(ver), "SFRAME_EH_VERSION=%d", version);
		execve(exe, argv, envp);
		_exit(4);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

TEST_F(sframe, libc_walked_by_tables_made_from_eh_frame)
{
	char exe[4096], lib[4096];
	int ret, version;

	ASSERT_EQ(0, sibling(exe, sizeof(exe), "sframe_test"));
	ASSERT_EQ(0, sibling(lib, sizeof(lib), "libsframe-eh.so"))
		TH_LOG("%s: %s", lib, strerror(errno));

	/* libc without a table: the walk does not get through qsort(). */
	ret = run_through_libc(exe, NULL, 3);
	EXPECT_EQ(1, ret) TH_LOG("without tables for libc: child status %d (0: through)", ret);
	for (version = 2; version <= 3; version++) {
		ret = run_through_libc(exe, lib, version);
		EXPECT_EQ(0, ret)
			TH_LOG("libsframe-eh.so v%d: child status %d (1: not through, 2: no walk)",
			       version, ret);
	}
}

/*
 * sframe_eh_test is this program built without SFrame, as Debian builds
 * its programs: libsframe-eh.so makes the program's own table too, which
 * must lie within 2 GiB of its code (a PIE program is mapped far from the
 * libraries, where mmap() places memory by default).
 */
TEST_F(sframe, program_walked_by_tables_made_from_eh_frame)
{
	char exe[4096], lib[4096];
	int ret;

	ASSERT_EQ(0, sibling(exe, sizeof(exe), "sframe_eh_test"))
		TH_LOG("%s: %s", exe, strerror(errno));
	ASSERT_EQ(0, sibling(lib, sizeof(lib), "libsframe-eh.so"))
		TH_LOG("%s: %s", lib, strerror(errno));

	ret = run_through_libc(exe, NULL, 3);
	EXPECT_EQ(1, ret) TH_LOG("without tables: child status %d (0: through)", ret);
	ret = run_through_libc(exe, lib, 3);
	EXPECT_EQ(0, ret)
		TH_LOG("with libsframe-eh.so: child status %d (1: not through, 2: no walk)", ret);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], THROUGH_LIBC_ARG))
		return through_libc();
	return test_harness_run(argc, argv);
}
