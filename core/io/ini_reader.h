/*
 * ini_reader.h — an INI file read with the system inih into a document that remembers where
 * every section and key came from, so each later error can name FILE:LINE. Run files
 * (config/run_config.c) and pack manifests (host/manifest.c) are read by it: one dialect for both.
 *
 * Debian's libinih (55) has a fixed 200-byte stack line buffer, no line number in its handler,
 * inline comments after whitespace + ';', and multi-line values. This module feeds inih one
 * physical line at a time through ini_parse_stream, counts lines, and turns what inih would do
 * silently into errors:
 *   - a line longer than inih's buffer (199 characters) is an error naming the line and limit
 *     (inih would split it into two lines);
 *   - a section name longer than 49 characters (inih truncates it);
 *   - a line that is neither blank, comment, [section] nor key = value;
 *   - invalid UTF-8 or a NUL byte.
 *
 * The INI dialect, as users write it:
 *   [section]
 *   key = value            ; a comment: ';' after whitespace starts one
 *   key = a;b              ; a ';' with no whitespace before it is part of the value ("a;b")
 *   key =;starts           ; a value may begin with ';' if no space separates it from '='
 *   long = first part of a long value
 *       continued here     ; an indented line continues the key above: the pieces are joined
 *                          ; with nothing between them (the indentation and the line ends are
 *                          ; dropped), so split a long value between two non-blank characters
 * Continuation lines must follow their key directly (no blank or comment line between) and may
 * not carry a ';' comment: this inih keeps it as part of the value, so we refuse it.
 * Lines starting with ';' or '#' are comments. A value cannot contain whitespace followed by ';'.
 */
#ifndef GRPO_INI_READER_H
#define GRPO_INI_READER_H

#include <stddef.h>

/* A list of diagnostics, each one line "FILE:LINE: what is wrong, what was expected". */
typedef struct grpo_diag {
    char **msg; /* [n] malloc'd strings, owned */
    int n, cap;
} grpo_diag;

/* Appends one printf-formatted message. Allocation failure drops the message silently. */
void grpo_diag_add(grpo_diag *d, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void grpo_diag_free(grpo_diag *d);

/* One key = value line, with its continuation lines already joined. */
typedef struct grpo_ini_entry {
    char *key;     /* as inih split it (trailing whitespace stripped) */
    char *value;   /* key line value + every continuation line, joined with nothing between */
    int line;      /* line of "key = value" */
    int last_line; /* last continuation line; == line when there is none */
} grpo_ini_entry;

/* A [section] header and its entries in file order. A header repeated in the file gives two
 * sections: the document keeps what the file says, the caller decides what is a duplicate. */
typedef struct grpo_ini_section {
    char *name;              /* text between '[' and ']' as inih sees it; "" before any header */
    int line;                /* header line; 0 for the "" section */
    grpo_ini_entry *entries; /* [n_entries] */
    int n_entries, cap_entries;
} grpo_ini_section;

typedef struct grpo_ini_doc {
    char *path;                  /* file name used in messages */
    grpo_ini_section *sections;  /* [n_sections] in file order */
    int n_sections, cap_sections;
    int n_lines;                 /* physical lines read */
} grpo_ini_doc;

/* The longest line (in bytes, without its line end) inih's buffer can hold. */
#define GRPO_INI_MAX_LINE_CHARS 199
/* The longest section name inih keeps. */
#define GRPO_INI_MAX_SECTION_CHARS 49

/* Reads the file at path into *doc (zeroed first; free with grpo_ini_doc_free even on failure).
 * Returns 0 when the file is well-formed INI; otherwise -1 with every problem appended to diag
 * as "PATH:LINE: ..." ("PATH: ..." when the file cannot be read). */
int grpo_ini_read_file(grpo_ini_doc *doc, const char *path, grpo_diag *diag);
/* The same for text held in memory; name is used in messages in place of a path. */
int grpo_ini_read_string(grpo_ini_doc *doc, const char *name, const char *text, grpo_diag *diag);
void grpo_ini_doc_free(grpo_ini_doc *doc);

/* Sets section.key = value in doc as if the file said it at line (the caller's numbering: a run's
 * --set overrides use negative lines). replace: first drop every entry of key in that section (a
 * value replaces the file's); else append one more (list keys). A missing section is appended.
 * Returns 0, or -1 when out of memory. */
int grpo_ini_doc_set(grpo_ini_doc *doc, const char *section, const char *key, const char *value,
                     int line, int replace);

#endif
