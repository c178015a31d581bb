/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _LINUX_UNWIND_USER_TYPES_H
#define _LINUX_UNWIND_USER_TYPES_H

#include <linux/types.h>

/**
 * struct unwind_stacktrace - a user stack, innermost first
 * @nr:		number of entries
 * @entries:	user addresses; entries[0] is the user IP at kernel entry
 */
struct unwind_stacktrace {
	unsigned int	nr;
	unsigned long	*entries;
};

/**
 * struct unwind_user_frame - how to step from a frame to its caller's
 * @cfa_off:	the canonical frame address (CFA: the stack pointer before
 *		the call) is the stack or frame pointer plus this
 * @ra_off:	the return address is saved at CFA + @ra_off
 * @fp_off:	the caller's frame pointer is saved at CFA + @fp_off; 0: it
 *		was not saved, the frame pointer is still the caller's
 * @use_fp:	the CFA is based on the frame pointer, not the stack pointer
 * @cfa_deref:	the CFA is the word saved at that address (a function that
 *		realigned its stack keeps it there)
 * @fp_from_fp:	the caller's frame pointer is saved at the frame pointer
 *		+ @fp_off instead, 0 included
 * @outermost:	the frame has no caller: the walk ends there
 * @signal:	the frame is a signal's restorer: its caller is the context
 *		the signal interrupted, saved in the signal frame at the stack
 *		pointer (asm/unwind_user.h); the other fields do not apply
 *
 * A frame-pointer frame is one fixed rule (asm/unwind_user.h); an SFrame
 * table gives one per address (kernel/unwind/sframe.c).
 */
struct unwind_user_frame {
	s32	cfa_off;
	s32	ra_off;
	s32	fp_off;
	bool	use_fp;
	bool	cfa_deref;
	bool	fp_from_fp;
	bool	outermost;
	bool	signal;
};

#endif /* _LINUX_UNWIND_USER_TYPES_H */
