/* USDT probes whose arguments gcc writes in each operand form of its
   target (TestParseUSDTArgsFromNotes builds it for x86-64 and arm64 at
   -O0 and -O2): registers of each size, memory at a base register with
   and without a displacement, with an index register and scale, on the
   stack, and constants. Each argument's C type gives its size and sign.
   Built with -nostdlib: it is read, never run. */
#include <sys/sdt.h>

struct vec { long pad; long v[8]; };

/* Registers: signed 1, unsigned 2, signed 4, unsigned 8 bytes. */
__attribute__((noinline)) void regs(signed char a, unsigned short b, int c, unsigned long d) {
	STAP_PROBE4(f, regs, a, b, c, d);
}

/* x->v[i]: 8(%rdi,%rsi,8) on x86-64 at -O2; arm64 computes the address
   and reads [x0, 8]. */
__attribute__((noinline)) void indexed(struct vec *x, long i) { STAP_PROBE1(f, indexed, x->v[i]); }

/* p[2] and *p: 16(%rdi) and (%rdi); [x0, 16] and [x0]. */
__attribute__((noinline)) void based(long *p) { STAP_PROBE2(f, based, p[2], *p); }

/* Constants: $5 and $-7; 5 and -7. */
__attribute__((noinline)) void consts(void) { STAP_PROBE2(f, consts, 5, -7L); }

/* A local kept on the stack at -O0: -20(%rbp); [sp, 12]. */
__attribute__((noinline)) void stack(int a) {
	int local = a * 3;
	STAP_PROBE1(f, stack, local);
}

/* Globals: x86-64 reads bt_table[i] as (%rax,%rdi,8), base and index
   without a displacement, and bt_one rip-relative, which probes cannot
   read; arm64 computes their addresses into registers ([x1, 64]). */
long bt_table[8];
long bt_one;
__attribute__((noinline)) void global(long i) { STAP_PROBE2(f, global, bt_table[i], bt_one); }

static volatile long in[10];

void _start(void) {
	struct vec x;
	for (int i = 0; i < 9; i++)
		x.v[i % 8] = in[i];
	regs((signed char)in[0], (unsigned short)in[1], (int)in[2], (unsigned long)in[3]);
	indexed(&x, in[4]);
	based((long *)in);
	consts();
	stack((int)in[5]);
	global(in[6]);
	for (;;)
		;
}
