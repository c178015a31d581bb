/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _LINUX_UNWIND_USER_TYPES_H
#define _LINUX_UNWIND_USER_TYPES_H

/**
 * struct unwind_stacktrace - a user stack, innermost first
 * @nr:		number of entries
 * @entries:	user addresses; entries[0] is the user IP at kernel entry
 */
struct unwind_stacktrace {
	unsigned int	nr;
	unsigned long	*entries;
};

#endif /* _LINUX_UNWIND_USER_TYPES_H */
