// SPDX-License-Identifier: GPL-2.0
/*
 * The rules the deferred user stack walk finds in SFrame tables, and
 * their cache, driven through the test hook of lib/test_unwind_deferred.c:
 * a recursion looks its rule up once, later walks of the process read no
 * table, and the cached rules go with their table.
 *
 * Built with SFrame (-Wa,--gsframe) and without frame pointers, as
 * sframe_test.h says.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "../kselftest_harness.h"
#include "udt_hook.h"
#include "sframe_chain.h"
#include "sframe_test.h"

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

TEST_HARNESS_MAIN
