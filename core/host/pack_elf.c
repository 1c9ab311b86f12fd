/* pack_elf.c — a library's machine from its ELF header, compared with our own (pack_elf.h). */
#include "host/pack_elf.h"

#include <elf.h>
#include <stdio.h>
#include <string.h>

/* The identity dlopen cares about: class, byte order, machine. */
typedef struct elf_id {
    unsigned char cls, data;
    unsigned machine;
} elf_id;

/* Reads the identity of path; 0 ok, -1 cannot open, -2 not ELF. */
static int read_id(const char *path, elf_id *id) {
    FILE *f = fopen(path, "rbe");
    if (!f) return -1;
    unsigned char h[EI_NIDENT + 4]; /* e_ident, e_type (2), e_machine (2) */
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    if (n < sizeof h || memcmp(h, ELFMAG, SELFMAG) != 0) return -2;
    id->cls = h[EI_CLASS], id->data = h[EI_DATA];
    const unsigned char *m = h + EI_NIDENT + 2;
    id->machine = id->data == ELFDATA2MSB ? (unsigned)(m[0] << 8 | m[1])
                                          : (unsigned)(m[1] << 8 | m[0]);
    return 0;
}

const char *grpo_elf_machine_name(unsigned machine, char *buf, size_t size) {
    switch (machine) {
    case EM_X86_64: return "x86-64";
    case EM_386: return "i386";
    case EM_AARCH64: return "aarch64";
    case EM_ARM: return "arm";
    case EM_RISCV: return "riscv";
    case EM_PPC64: return "ppc64";
    case EM_PPC: return "ppc";
    case EM_S390: return "s390x";
    case EM_MIPS: return "mips";
    case EM_LOONGARCH: return "loongarch";
    default: snprintf(buf, size, "machine %u", machine); return buf;
    }
}

/* "64-bit little-endian x86-64" */
static void describe(const elf_id *id, char *out, size_t size) {
    char m[32];
    snprintf(out, size, "%s %s-endian %s", id->cls == ELFCLASS64 ? "64-bit" : "32-bit",
             id->data == ELFDATA2MSB ? "big" : "little",
             grpo_elf_machine_name(id->machine, m, sizeof m));
}

int grpo_elf_check(const char *path, char *why, size_t size) {
    elf_id lib, self;
    int rc = read_id(path, &lib);
    if (rc == -1) return 0;
    if (rc == -2) {
        snprintf(why, size, "not an ELF file; expected a shared library (.so)");
        return 1;
    }
    if (read_id("/proc/self/exe", &self) != 0) return 0; /* cannot tell: let dlopen decide */
    if (lib.machine == self.machine && lib.cls == self.cls && lib.data == self.data) return 0;
    char a[64], b[64], ma[32], mb[32];
    if (lib.machine != self.machine) {
        snprintf(why, size, "built for %s; this grpo is %s",
                 grpo_elf_machine_name(lib.machine, ma, sizeof ma),
                 grpo_elf_machine_name(self.machine, mb, sizeof mb));
    } else {
        describe(&lib, a, sizeof a), describe(&self, b, sizeof b);
        snprintf(why, size, "built for %s; this grpo is %s", a, b);
    }
    return 1;
}
