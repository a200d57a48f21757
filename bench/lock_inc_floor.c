// The floor under any atomic counter on this machine: back-to-back `lock inc` and plain `inc`
// on one memory word, nanoseconds per operation. Build: gcc -O2 bench/lock_inc_floor.c
#include <stdio.h>
#include <time.h>
#include <stdint.h>
static volatile uint64_t c;
int main(){ struct timespec a,b; long n=200000000;
clock_gettime(CLOCK_MONOTONIC,&a);
for(long i=0;i<n;i++) __asm__ volatile("lock incq %0":"+m"(c)::"cc");
clock_gettime(CLOCK_MONOTONIC,&b);
printf("lock inc %.3f ns\n", ((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/n);
clock_gettime(CLOCK_MONOTONIC,&a);
for(long i=0;i<n;i++) __asm__ volatile("incq %0":"+m"(c)::"cc");
clock_gettime(CLOCK_MONOTONIC,&b);
printf("inc %.3f ns\n", ((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/n);
}
