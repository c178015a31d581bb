/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Labels that the inline assembly of frames_syscall() (udt_test.h) and
 * corrupt_syscall() (unwind_deferred_test.c) put right after their
 * system call instructions: the user IPs the kernel sees for those calls.
 */
#ifndef UNWIND_DEFERRED_SYSCALL_IP_H
#define UNWIND_DEFERRED_SYSCALL_IP_H

extern const char frames_syscall_ip[] __attribute__((visibility("hidden")));
extern const char corrupt_syscall_ip[] __attribute__((visibility("hidden")));

#endif
