/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Walking the current task's user stack by its frame pointers, in task
 * context where page faults are allowed (kernel/unwind/user.c).
 */
#ifndef _LINUX_UNWIND_USER_H
#define _LINUX_UNWIND_USER_H

#ifdef CONFIG_HAVE_UNWIND_USER_FP
unsigned int unwind_user_walk(unsigned long *entries, unsigned int max);
#else
static inline unsigned int unwind_user_walk(unsigned long *entries,
					    unsigned int max)
{
	return 0;
}
#endif

#endif /* _LINUX_UNWIND_USER_H */
