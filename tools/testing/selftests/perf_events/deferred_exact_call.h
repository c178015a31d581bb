/* SPDX-License-Identifier: GPL-2.0 */
/*
 * deferred_exact_uprobe's probed call instruction: a uprobe on it makes the
 * kernel emulate the call (push the return address, jump), inside the
 * stay of the breakpoint. Its target only returns.
 */
#ifndef DEFERRED_EXACT_CALL_H
#define DEFERRED_EXACT_CALL_H

asm(".pushsection .text\n"
	".globl exact_call_target\n"
	".hidden exact_call_target\n"
	".type exact_call_target, @function\n"
	"exact_call_target:\n\t"
	"ret\n"
	".size exact_call_target, .-exact_call_target\n"
	".popsection");

/* The call instruction (emulated_call()) and its target. */
extern const char exact_call_site[] __attribute__((visibility("hidden")));
extern const char exact_call_target[] __attribute__((visibility("hidden")));

#endif /* DEFERRED_EXACT_CALL_H */
