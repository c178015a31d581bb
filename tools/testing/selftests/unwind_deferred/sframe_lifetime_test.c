// SPDX-License-Identifier: GPL-2.0
/*
 * SFrame tables and the code they describe going away, driven through
 * the test hook of lib/test_unwind_deferred.c: the table or the code
 * unmapped while a walk through it is pending, and the tables a forked
 * child keeps.
 *
 * Built with SFrame (-Wa,--gsframe) and without frame pointers, as
 * sframe_test.h says.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "udt_hook.h"
#include "sframe_chain.h"
#include "sframe_test.h"

#define WAIT_SECONDS		10.0

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

TEST_HARNESS_MAIN
