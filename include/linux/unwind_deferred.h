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
void unwind_deferred_pause(void);
void unwind_deferred_resume(void);
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
