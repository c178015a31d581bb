/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Labels that unwind_deferred_test.c's inline assembly puts right after its
 * system call instructions: the user IPs the kernel sees for those calls.
 */
#ifndef UNWIND_DEFERRED_SYSCALL_IP_H
#define UNWIND_DEFERRED_SYSCALL_IP_H

extern const char frames_syscall_ip[] __attribute__((visibility("hidden")));
extern const char corrupt_syscall_ip[] __attribute__((visibility("hidden")));

#endif
