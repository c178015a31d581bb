/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Deferred user stack walks: a consumer asks, from any context, for the
 * current task's user stack; the stack is walked once per entry context
 * (a "stay" in the kernel, from entry until the return to user space), in
 * task context on the way back to user space, and every consumer that
 * asked is called back with it and the stay's cookie.
 * Documentation/core-api/unwind_deferred.rst has the rules.
 */
#ifndef _LINUX_UNWIND_DEFERRED_H
#define _LINUX_UNWIND_DEFERRED_H

#include <linux/list.h>
#include <linux/percpu-defs.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/unwind_deferred_types.h>
#include <linux/unwind_user_types.h>

struct unwind_work;

/*
 * Called in task context (may sleep, may fault) before the task returns to
 * user space, once per kernel stay for each consumer that asked in it. The
 * trace is empty when the walk found nothing; it is valid until return.
 */
typedef void (*unwind_callback_t)(struct unwind_work *work,
				  struct unwind_stacktrace *trace, u64 cookie);

/**
 * struct unwind_work - a consumer of deferred stack walks
 * @list:	entry in the list of registered consumers
 * @func:	the callback
 * @bit:	the consumer's bit in the tasks' request masks; -1 when not
 *		registered
 */
struct unwind_work {
	struct list_head	list;
	unwind_callback_t	func;
	int			bit;
};

/* The most consumers registered at once. */
#define UNWIND_MAX_CONSUMERS	16

/*
 * The deepest user stack walked; deeper frames are cut. The walk cache (a
 * cookie, a count and these entries) is one 4 KiB allocation.
 */
#define UNWIND_MAX_ENTRIES	((SZ_4K - 2 * sizeof(u64)) / sizeof(unsigned long))

#ifdef CONFIG_UNWIND_DEFERRED

int unwind_deferred_init(struct unwind_work *work, unwind_callback_t func);
void unwind_deferred_cancel(struct unwind_work *work);
int unwind_deferred_request(struct unwind_work *work, u64 *cookie);
void unwind_deferred_mark_served(struct unwind_work *work);
int unwind_deferred_cached(u64 cookie, struct unwind_stacktrace *trace);

void unwind_task_init(struct task_struct *task);
void unwind_task_free(struct task_struct *task);
void unwind_deferred_task_exit(struct task_struct *task);
void __unwind_deferred_pause(void);
void unwind_deferred_user_rewrite(void);
void unwind_deferred_end_stay(void);

DECLARE_PER_CPU(bool, unwind_exit_work_ran);

/*
 * The return to user space of the task on this CPU is past its exit work,
 * with interrupts off until user mode: a request from anything traced from
 * here on but an NMI is too late to be deferred (unwind_deferred_request()).
 * An NMI's request raises a self-interrupt whatever it interrupted.
 * raw_cpu_*(): nothing here may be instrumented, and nothing can migrate.
 */
static __always_inline void unwind_exit_work_done(void)
{
	raw_cpu_write(unwind_exit_work_ran, true);
}

/* The very end of the return to user space, after the last traced code. */
static __always_inline void unwind_exit_work_reset(void)
{
	raw_cpu_write(unwind_exit_work_ran, false);
}

/*
 * In unwind_task_info::cookie: no request is deferred until
 * unwind_deferred_resume() (an exec changing the task's tid, a uprobe
 * moving its registers) or the end of the stay. Never a real cookie, whose
 * high half is odd.
 */
#define UNWIND_COOKIE_BLOCKED	1ULL

/**
 * unwind_deferred_pause - run the pending walk, then defer nothing for now
 *
 * Context: current, task context, may sleep and fault, no lock held.
 *
 * For a stretch of code that holds locks or an RCU read section while it
 * changes what a walk would see: the user registers (a uprobe hit, whose
 * handlers and call emulation run in an RCU read section), the task's
 * tid (exec: de_thread() may give a thread its leader's, and a record
 * written after would not carry the tid of its samples), or what a tracer
 * may write while the task is stopped (ptrace); or that runs task work
 * under a lock (KVM_RUN, under the vCPU's mutex). The pending walk runs
 * here, against the stack the requests saw, and until
 * unwind_deferred_resume() or the end of the stay requests are walked in
 * place (-EAGAIN): no walk runs inside the stretch.
 *
 * With no stay under way, nothing is pending: one cmpxchg on the task's
 * cookie (an NMI may take one meanwhile) is all it costs.
 */
static inline void unwind_deferred_pause(void)
{
	u64 none = 0;

	if (likely(try_cmpxchg64(&current->unwind_info.cookie, &none,
				 UNWIND_COOKIE_BLOCKED)))
		return;
	__unwind_deferred_pause();
}

/**
 * unwind_deferred_resume - defer requests again
 *
 * Context: current, the end of the stretch unwind_deferred_pause() began,
 * or later.
 *
 * A later request takes a new cookie and gets the stack the task has then.
 */
static inline void unwind_deferred_resume(void)
{
	u64 blocked = UNWIND_COOKIE_BLOCKED;

	try_cmpxchg64(&current->unwind_info.cookie, &blocked, 0);
}

/*
 * On the return to user space, interrupts off, after the interrupts-on
 * tracing and lockdep hooks: the kernel stay ends, and with it the cookie.
 * One test of one word when nobody asked for anything in this stay.
 */
static __always_inline void unwind_reset_info(void)
{
	if (unlikely(READ_ONCE(current->unwind_info.cookie)))
		unwind_deferred_end_stay();
}

/*
 * The kernel is about to rewrite the user registers or stack of current:
 * one test of one word when nobody asked for anything in this stay.
 */
static inline void unwind_user_rewrite(void)
{
	if (unlikely(READ_ONCE(current->unwind_info.cookie)))
		unwind_deferred_user_rewrite();
}

#ifdef CONFIG_TEST_UNWIND_DEFERRED
void unwind_test_exit_to_user_mode(void);
#else
static inline void unwind_test_exit_to_user_mode(void) {}
#endif

#else /* !CONFIG_UNWIND_DEFERRED */

static inline int unwind_deferred_init(struct unwind_work *work,
				       unwind_callback_t func)
{
	return -EOPNOTSUPP;
}

static inline void unwind_deferred_cancel(struct unwind_work *work) {}

static inline int unwind_deferred_request(struct unwind_work *work,
					  u64 *cookie)
{
	*cookie = 0;
	return -EOPNOTSUPP;
}

static inline void unwind_deferred_mark_served(struct unwind_work *work) {}

static inline int unwind_deferred_cached(u64 cookie,
					 struct unwind_stacktrace *trace)
{
	return -ENOENT;
}

static inline void unwind_task_init(struct task_struct *task) {}
static inline void unwind_task_free(struct task_struct *task) {}
static inline void unwind_deferred_task_exit(struct task_struct *task) {}
static inline void unwind_deferred_pause(void) {}
static inline void unwind_deferred_resume(void) {}
static inline void unwind_user_rewrite(void) {}
static inline void unwind_exit_work_done(void) {}
static inline void unwind_exit_work_reset(void) {}
static inline void unwind_reset_info(void) {}
static inline void unwind_test_exit_to_user_mode(void) {}

#endif /* CONFIG_UNWIND_DEFERRED */

#endif /* _LINUX_UNWIND_DEFERRED_H */
