/*
 * chat_template.h — Hugging Face chat templates rendered in C, byte-identical to transformers.
 *
 * A Jinja subset interpreter (core/jinja_*.c) configured as transformers' apply_chat_template
 * configures jinja2: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True), default
 * keep_trailing_newline=False, extensions loopcontrols ({% break %}/{% continue %}) and the
 * {% generation %} tag, globals raise_exception / strftime_now / namespace / dict / range, and
 * tojson = json.dumps(ensure_ascii=False). The variables a template sees are those transformers
 * passes: messages (list of {role, content, ...}), add_generation_prompt, tools (None unless
 * given), documents (None), the special tokens (bos_token, eos_token when given) and any extras
 * (enable_thinking, ...). tojson takes transformers' arguments (ensure_ascii, indent, separators,
 * sort_keys).
 *
 * Supported: text, {{ }}, {% if/elif/else %}, {% for %} (with else, filter "if", tuple targets,
 * loop.index/index0/revindex/revindex0/first/last/length/previtem/nextitem/cycle), {% set %}
 * (names, tuples, ns.attr, {% set x %}...{% endset %}), {% break/continue %}, {% generation %},
 * {% macro name(a, b=default) %} (no varargs/kwargs/caller), {% raw %}, comments,
 * whitespace control (-/+), literals (str, int, float, bool, none, list, tuple, dict),
 * + - * / // % ** ~, comparisons, in / not in, and/or/not, x if c else y,
 * subscripts and slices (negative, [::-1], by code point on str), obj.attr / obj['key'],
 * str methods (startswith endswith split rsplit strip lstrip rstrip replace upper lower title
 * capitalize find rfind count join splitlines is*), dict methods (get items keys values),
 * filters (abs capitalize count d default dictsort first float int items join last length list
 * lower map reject rejectattr replace reverse round safe select selectattr sort string sum title
 * tojson trim unique upper wordcount) and tests (defined undefined none string number integer
 * float boolean true false mapping iterable sequence callable lower upper odd even divisibleby
 * sameas in eq/equalto ne lt le gt ge and their operator spellings).
 * Anything else (call blocks, include/import/extends, filter blocks, printf-style %,
 * unknown filters/tests/methods) is an error naming the construct and its line: unknown
 * statements, filters and tests at compile time (as jinja2 does), the rest at render time.
 * Known differences: str.upper/lower/title act on ASCII letters only.
 *
 * Thread-safety: a compiled template is immutable; it may be rendered from several threads.
 */
#ifndef GRPO_CHAT_TEMPLATE_H
#define GRPO_CHAT_TEMPLATE_H

#include <stddef.h>

#include "grpo/reward.h" /* grpo_message, grpo_error */

typedef struct grpo_chat_template grpo_chat_template;

/* One extra template variable; the value is JSON text ("true", "\"x\"", "[1,2]"). */
typedef struct grpo_chat_var {
    const char *name;
    const char *json;
} grpo_chat_var;

/* What apply_chat_template passes besides the messages. Zero-initialise and set what you need. */
typedef struct grpo_chat_options {
    int add_generation_prompt; /* 0/1 */
    const char *bos_token;     /* NULL: the variable is undefined */
    const char *eos_token;     /* NULL: the variable is undefined */
    const char *tools_json;    /* JSON list of tool schemas; NULL: tools = None */
    const grpo_chat_var *vars; /* [n_vars] extra variables, e.g. {"enable_thinking", "false"} */
    size_t n_vars;
} grpo_chat_options;

/* Compiles template text; name is used in error messages ("name:line: what"). On success *out
 * is a new template the caller frees with grpo_chat_template_free. Returns GRPO_OK, or
 * GRPO_ERR_INVALID / GRPO_ERR_UNSUPPORTED with err naming the construct and its line. */
int grpo_chat_template_compile(const char *text, const char *name, grpo_chat_template **out,
                               grpo_error *err);

/* Reads a template from a file: a .jinja file is the template text; a .json file is a
 * tokenizer_config.json whose "chat_template" is used (a string, or in a list of
 * {"name", "template"} the one named "default"). */
int grpo_chat_template_load(const char *path, grpo_chat_template **out, grpo_error *err);

/* Renders messages[0..n) (role/content pairs; a NULL content is left out of the message, as
 * transformers drops None values). *out is a malloc'ed NUL-terminated UTF-8 string the caller
 * frees. Errors (raise_exception, undefined values, type errors) go to err with the line. */
int grpo_chat_template_render(const grpo_chat_template *tpl, const grpo_message *messages, size_t n,
                              const grpo_chat_options *opt, char **out, grpo_error *err);

/* The same with messages given as a JSON list of objects, so messages may carry any keys
 * (reasoning_content, tool_calls, name, ...). Keys whose value is null are dropped and
 * reasoning_content/thinking/reasoning are aliased as transformers does. */
int grpo_chat_template_render_json(const grpo_chat_template *tpl, const char *messages_json,
                                   const grpo_chat_options *opt, char **out, grpo_error *err);

void grpo_chat_template_free(grpo_chat_template *tpl);

/* The built-in ChatML template (the default when a model ships none):
 * <|im_start|>{role}\n{content}<|im_end|>\n per message, then <|im_start|>assistant\n when
 * add_generation_prompt. Static storage. */
const char *grpo_chat_template_chatml(void);

/*
 * grpo_chat_format_simple — the fallback a run file can choose instead of a Jinja template.
 *
 * format is the whole prompt with placeholders:
 *   {system}     the content of the system message ("" when there is none)
 *   {user}       the content of the user message
 *   {assistant}  the content of an assistant message ("" when there is none)
 *   {{ and }}    a literal { and }
 *   \n \t \\     newline, tab, backslash (so a one-line INI value can hold newlines)
 * e.g. "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n".
 * The messages may hold at most one message of each role (system, user, assistant), which is
 * the shape of a GRPO prompt; anything else (a second user turn, an unknown role or
 * placeholder, an unterminated "{") is an error that says so. *out is malloc'ed.
 */
int grpo_chat_format_simple(const char *format, const grpo_message *messages, size_t n, char **out,
                            grpo_error *err);

/* How a dataset's message prompts become text: a compiled template with its options, or (when
 * format is non-NULL) the simple format. Pass a pointer to one as the user argument of
 * grpo_chat_render_messages, which has the grpo_render_fn signature of dataset.h. Usually
 * opt.add_generation_prompt = 1 for prompts. Borrowed pointers; nothing is owned. */
typedef struct grpo_chat_renderer {
    const grpo_chat_template *tpl;
    grpo_chat_options opt;
    const char *format;
} grpo_chat_renderer;

int grpo_chat_render_messages(void *renderer, const grpo_message *messages, size_t n, char **out,
                              grpo_error *err);

#endif
