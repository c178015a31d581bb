/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Walking the current task's user stack by its frame pointers, in task
 * context where page faults are allowed (kernel/unwind/user.c).
 */
#ifndef _LINUX_UNWIND_USER_H
#define _LINUX_UNWIND_USER_H

#include <linux/errno.h>
#include <linux/unwind_user_types.h>

#ifdef CONFIG_HAVE_UNWIND_USER_FP
int unwind_user(struct unwind_stacktrace *trace, unsigned int max_entries);
#else
static inline int unwind_user(struct unwind_stacktrace *trace,
			      unsigned int max_entries)
{
	trace->nr = 0;
	return -EINVAL;
}
#endif

#endif /* _LINUX_UNWIND_USER_H */
