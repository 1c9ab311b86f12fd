/*
 * pack_elf.h — is a pack library built for the machine this grpo runs on? Read from the ELF
 * header before dlopen, whose own answer for a foreign library ("cannot open shared object
 * file", "wrong ELF class") does not say which machine the library is for.
 */
#ifndef GRPO_PACK_ELF_H
#define GRPO_PACK_ELF_H

#include <stddef.h>

/* 0 when path is an ELF file of this process's machine, class (32/64-bit) and byte order, or
 * when it cannot be opened (left for dlopen to report). 1 otherwise, with why set to
 * "built for aarch64; this grpo is x86-64" or "not an ELF file (...)". */
int grpo_elf_check(const char *path, char *why, size_t size);

/* The machine name of an ELF e_machine value ("x86-64", "aarch64", ...; "machine N" if unknown).
 * Returns a static string or writes into buf. */
const char *grpo_elf_machine_name(unsigned machine, char *buf, size_t size);

#endif
