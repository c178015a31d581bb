/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A call chain that only SFrame tables can walk, for the selftests built
 * with -fomit-frame-pointer -Wa,--gsframe (x86-64): chain_1() ->
 * chain_2() -> sframe_syscall() or sframe_spin(). Each function has a
 * stack frame of its own and none keeps a frame pointer; the bottom two,
 * in assembly, zero %rbp while they block or spin, so that a walk by frame
 * pointers ends at the first frame. They save the caller's %rbp, and say
 * so in their tables, so that the walk restores it for the frames above.
 * Each function notes its own return address: what the walk must find.
 */
#ifndef UNWIND_DEFERRED_SFRAME_CHAIN_H
#define UNWIND_DEFERRED_SFRAME_CHAIN_H

#define NOIPA		__attribute__((noipa))

/**
 * struct chain - what a walk from the bottom of the chain must find
 * @ret: the return addresses of the bottom function, chain_2() and
 *	 chain_1()
 */
struct chain {
	unsigned long ret[3];
};

/**
 * struct chain_call - what the bottom of the chain does
 * @nr:		a system call and its arguments (sframe_syscall()), or
 * @spin:	loops to spin in user mode (sframe_spin()), if not 0
 */
struct chain_call {
	long nr, a1, a2, a3;
	unsigned long spin;
};

/*
 * long sframe_syscall(long nr, long a1, long a2, long a3, unsigned long *ret)
 * void sframe_spin(unsigned long loops, unsigned long *ret)
 */
asm(".pushsection .text\n"
	".type sframe_syscall, @function\n"
	"sframe_syscall:\n\t"
	".cfi_startproc\n\t"
	"mov (%rsp), %r9\n\t"
	"mov %r9, (%r8)\n\t"
	"push %rbp\n\t"
	".cfi_def_cfa_offset 16\n\t"
	".cfi_offset %rbp, -16\n\t"
	"sub $16, %rsp\n\t"
	".cfi_def_cfa_offset 32\n\t"
	"xor %ebp, %ebp\n\t"
	"mov %rdi, %rax\n\t"
	"mov %rsi, %rdi\n\t"
	"mov %rdx, %rsi\n\t"
	"mov %rcx, %rdx\n\t"
	"syscall\n"
	".globl sframe_syscall_ip\n"
	".hidden sframe_syscall_ip\n"
	"sframe_syscall_ip:\n\t"
	"add $16, %rsp\n\t"
	".cfi_def_cfa_offset 16\n\t"
	"pop %rbp\n\t"
	".cfi_restore %rbp\n\t"
	".cfi_def_cfa_offset 8\n\t"
	"ret\n\t"
	".cfi_endproc\n"
	".size sframe_syscall, .-sframe_syscall\n"
	".type sframe_spin, @function\n"
	"sframe_spin:\n\t"
	".cfi_startproc\n\t"
	"mov (%rsp), %rax\n\t"
	"mov %rax, (%rsi)\n\t"
	"push %rbp\n\t"
	".cfi_def_cfa_offset 16\n\t"
	".cfi_offset %rbp, -16\n\t"
	"sub $32, %rsp\n\t"
	".cfi_def_cfa_offset 48\n\t"
	"xor %ebp, %ebp\n"
	".globl sframe_spin_loop\n"
	".hidden sframe_spin_loop\n"
	"sframe_spin_loop:\n\t"
	"dec %rdi\n\t"
	"jnz sframe_spin_loop\n"
	".globl sframe_spin_end\n"
	".hidden sframe_spin_end\n"
	"sframe_spin_end:\n\t"
	"add $32, %rsp\n\t"
	".cfi_def_cfa_offset 16\n\t"
	"pop %rbp\n\t"
	".cfi_restore %rbp\n\t"
	".cfi_def_cfa_offset 8\n\t"
	"ret\n\t"
	".cfi_endproc\n"
	".size sframe_spin, .-sframe_spin\n"
	".popsection");

long sframe_syscall(long nr, long a1, long a2, long a3, unsigned long *ret);
void sframe_spin(unsigned long loops, unsigned long *ret);
/* The user IP of sframe_syscall()'s system call; sframe_spin()'s loop. */
extern const char sframe_syscall_ip[] __attribute__((visibility("hidden")));
extern const char sframe_spin_loop[] __attribute__((visibility("hidden")));
extern const char sframe_spin_end[] __attribute__((visibility("hidden")));

/*
 * frame[]: a frame of its own. The empty asm takes its address, so the
 * array is on the stack, and again after the call, so it stays there
 * (and the call is not a tail call).
 */
static NOIPA long chain_2(struct chain *c, const struct chain_call *cc)
{
	unsigned long frame[9];
	long ret = 0;

	asm volatile("" : : "r" (frame) : "memory");
	c->ret[1] = (unsigned long)__builtin_return_address(0);
	if (cc->spin)
		sframe_spin(cc->spin, &c->ret[0]);
	else
		ret = sframe_syscall(cc->nr, cc->a1, cc->a2, cc->a3, &c->ret[0]);
	asm volatile("" : : "r" (frame) : "memory");
	return ret;
}

static NOIPA long chain_1(struct chain *c, const struct chain_call *cc)
{
	unsigned long frame[2];
	long ret;

	asm volatile("" : : "r" (frame) : "memory");
	c->ret[2] = (unsigned long)__builtin_return_address(0);
	ret = chain_2(c, cc);
	asm volatile("" : : "r" (frame) : "memory");
	return ret;
}

#endif /* UNWIND_DEFERRED_SFRAME_CHAIN_H */
