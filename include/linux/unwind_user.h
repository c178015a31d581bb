/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Walking the current task's user stack by its frame pointers, in task
 * context where page faults are allowed (kernel/unwind/user.c).
 */
#ifndef _LINUX_UNWIND_USER_H
#define _LINUX_UNWIND_USER_H

#include <linux/errno.h>
#include <linux/unwind_user_types.h>

/*
 * The most reads of user memory one walk makes, of the stack and of SFrame
 * tables: a frame-pointer walk of the deepest stack needs two per frame, a
 * walk by tables some twenty more (the search of a table, the rows of a
 * function). A table may make a frame cost thousands; with the budget, a
 * walk never costs more than this.
 */
#define UNWIND_USER_MAX_READS	16384

#ifdef CONFIG_HAVE_UNWIND_USER_FP
int unwind_user_faultable(struct unwind_stacktrace *trace, unsigned int max_entries);
#else
static inline int unwind_user_faultable(struct unwind_stacktrace *trace,
					unsigned int max_entries)
{
	trace->nr = 0;
	return -EINVAL;
}
#endif

#endif /* _LINUX_UNWIND_USER_H */
