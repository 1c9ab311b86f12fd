/* pattern.c — the limits every built-in reward puts on a PCRE2 match (pattern.h). */
#include "pattern.h"

pcre2_match_context *builtin_match_context(void) {
    pcre2_match_context *m = pcre2_match_context_create(NULL);
    if (m) {
        pcre2_set_match_limit(m, BUILTIN_MATCH_LIMIT);
        pcre2_set_depth_limit(m, BUILTIN_DEPTH_LIMIT);
    }
    return m;
}
