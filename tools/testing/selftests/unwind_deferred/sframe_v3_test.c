// SPDX-License-Identifier: GPL-2.0
/*
 * Version 3 SFrame tables of generated code in the deferred user stack
 * walk, driven through the test hook of lib/test_unwind_deferred.c:
 * DEFAULT and FLEX functions, the outermost-frame mark, FLEX rules that
 * walk a realigned frame, and a signal restorer.
 *
 * Built with SFrame (-Wa,--gsframe) and without frame pointers, as
 * sframe_test.h says.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "udt_hook.h"
#include "sframe_chain.h"
#include "sframe_test.h"

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

TEST_HARNESS_MAIN
