// Shared by bench/fentry_loop.c and bench/kernel_trace/bpf_ring.c (guest-side BPF peers built
// as static binaries): reading a BTF blob from /sys/kernel/btf and finding a FUNC in it, with
// no libbpf. Include after <stdint.h>, <stdio.h>, <stdlib.h> and <string.h>.
#ifndef KERF_BENCH_BTF_H
#define KERF_BENCH_BTF_H

struct btf_header {
    uint16_t magic;
    uint8_t version, flags;
    uint32_t hdr_len, type_off, type_len, str_off, str_len;
};

// Reads a whole BTF file into a fresh buffer.
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 20, n = 0;
    char *b = malloc(cap);
    for (size_t r; (r = fread(b + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap)
            b = realloc(b, cap *= 2);
    }
    fclose(f);
    *len = n;
    return b;
}

// Walks the types of BTF blob `b`: returns how many there are and, in *found, the index
// (from 0) of the FUNC named `name` (strings looked up in `strs`, which for split BTF is the
// base's strings followed by this blob's), or -1.
static uint32_t btf_walk(char *b, const char *name, const char *base_strs, uint32_t base_str_len,
                         long *found) {
    struct btf_header *h = (struct btf_header *)b;
    char *types = b + h->hdr_len + h->type_off, *end = types + h->type_len;
    char *strs = b + h->hdr_len + h->str_off;
    uint32_t n = 0;
    *found = -1;
    for (char *p = types; p < end; n++) {
        uint32_t name_off = ((uint32_t *)p)[0], info = ((uint32_t *)p)[1];
        uint32_t kind = (info >> 24) & 0x1f, vlen = info & 0xffff;
        const char *s = name_off < base_str_len ? base_strs + name_off : strs + (name_off - base_str_len);
        if (kind == 12 && name && !strcmp(s, name))
            *found = n;
        p += 12;
        switch (kind) {
        case 1: case 14: case 17: p += 4; break;                 // INT, VAR, DECL_TAG
        case 3: p += 12; break;                                   // ARRAY
        case 4: case 5: case 15: case 19: p += 12 * vlen; break;  // STRUCT, UNION, DATASEC, ENUM64
        case 6: case 13: p += 8 * vlen; break;                    // ENUM, FUNC_PROTO
        default: break;
        }
    }
    return n;
}

#endif
