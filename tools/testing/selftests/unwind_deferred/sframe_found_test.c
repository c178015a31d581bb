// SPDX-License-Identifier: GPL-2.0
/*
 * SFrame tables that the deferred user stack walk finds, driven through
 * the test hook of lib/test_unwind_deferred.c: the program's (found at
 * exec), a library's (found when dlopen() maps it, from a file system or
 * a memfd; not past a page of program headers), and those of generated
 * code registered with prctl(PR_SFRAME), versions 1 and 2, removed,
 * counted and capped.
 *
 * Built with SFrame (-Wa,--gsframe) and without frame pointers, as
 * sframe_test.h says.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "udt_hook.h"
#include "sframe_chain.h"
#include "sframe_test.h"

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

TEST_HARNESS_MAIN
