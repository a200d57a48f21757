#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int (*fp)(const char *) = puts;   /* address taken: a GLOB_DAT slot (.plt.got when also called) */
int main(int argc, char **argv) {
    char *p = malloc(16);
    strcpy(p, argc > 1 ? argv[1] : "x");
    puts(p);
    fp(p);
    printf("%zu\n", strlen(p));
    free(p);
    return 0;
}
