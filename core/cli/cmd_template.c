/* cmd_template.c — `grpo template`: render a chat template (or the simple format) on messages or
 * on a dataset line, to see exactly the prompt text the policy will get. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_template.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "io/dataset.h"

static void template_usage(FILE *out) {
    fprintf(
        out,
        "usage: grpo template TEMPLATE [options]\n"
        "  TEMPLATE                a .jinja file, a tokenizer_config.json, or 'chatml'\n"
        "  --messages JSON         the conversation: a JSON list of {role, content, ...}\n"
        "  --data FILE.jsonl       render the prompt of a dataset line instead\n"
        "  --line N                which non-blank example of --data (1-based, default 1)\n"
        "  --no-generation-prompt  render without add_generation_prompt (it is on by default)\n"
        "  --var NAME=JSON         an extra template variable, e.g. enable_thinking=false\n"
        "  --bos TEXT, --eos TEXT  the special tokens the template may use\n"
        "  --format FMT            use the simple format ({system} {user} {assistant}) instead\n"
        "The rendered text goes to stdout as is (no newline added).\n");
}

int cmd_template(int argc, char **argv) {
    const char *tpath = NULL, *messages = NULL, *data = NULL, *format = NULL;
    int64_t line = 1;
    int line_set = 0;
    grpo_chat_var vars[16];
    char *var_names[16];
    size_t n_vars = 0;
    grpo_chat_options opt = {.add_generation_prompt = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return template_usage(stdout), 0;
        if (!strcmp(a, "--no-generation-prompt"))
            opt.add_generation_prompt = 0;
        else if (next && !strcmp(a, "--messages"))
            messages = argv[++i];
        else if (next && !strcmp(a, "--data"))
            data = argv[++i];
        else if (next && !strcmp(a, "--line")) {
            line_set = grpo_cli_int64("template", a, argv[++i], 1, INT64_MAX, &line);
            if (!line_set) { /* a bad number, already said */
                for (size_t k = 0; k < n_vars; k++) free(var_names[k]);
                return 2;
            }
        }
        else if (next && !strcmp(a, "--bos"))
            opt.bos_token = argv[++i];
        else if (next && !strcmp(a, "--eos"))
            opt.eos_token = argv[++i];
        else if (next && !strcmp(a, "--format"))
            format = argv[++i];
        else if (next && !strcmp(a, "--var")) {
            const char *eq = strchr(next, '=');
            if (!eq || n_vars == 16) {
                fprintf(stderr, "grpo template: --var expects NAME=JSON (at most 16), got '%s'\n",
                        next);
                return 2;
            }
            var_names[n_vars] = strndup(next, (size_t)(eq - next));
            vars[n_vars] = (grpo_chat_var){var_names[n_vars], eq + 1};
            n_vars++, i++;
        } else if (a[0] != '-' && !tpath)
            tpath = a;
        else {
            fprintf(stderr, "grpo template: unexpected argument '%s'\n", a);
            template_usage(stderr);
            return 2;
        }
    }
    opt.vars = vars, opt.n_vars = n_vars;
    int status = 1;
    if (messages && data)
        status = grpo_cli_not_for("template", "--messages", "--data (it renders a dataset line)",
                                  "rendering without --data");
    else if (line_set && !data)
        status = grpo_cli_not_for("template", "--line", "--messages", "--data");
    else if (format && tpath)
        status = grpo_cli_not_for("template", "a TEMPLATE argument", "--format",
                                  "rendering with a chat template");
    if (status == 2) {
        for (size_t k = 0; k < n_vars; k++) free(var_names[k]);
        return 2;
    }
    grpo_error err;
    grpo_error_init(&err);
    grpo_chat_template *tpl = NULL;
    grpo_dataset *ds = NULL;
    char *out = NULL;
    if (!format && !tpath) {
        fprintf(stderr, "grpo template: no TEMPLATE given\n");
        template_usage(stderr);
        status = 2;
        goto done;
    }
    if (!messages && !data) {
        fprintf(stderr, "grpo template: give --messages JSON or --data FILE.jsonl\n");
        status = 2;
        goto done;
    }
    if (!format) {
        int rc = !strcmp(tpath, "chatml")
                     ? grpo_chat_template_compile(grpo_chat_template_chatml(), "chatml", &tpl, &err)
                     : grpo_chat_template_load(tpath, &tpl, &err);
        if (rc != GRPO_OK) goto fail;
    }
    if (data) {
        if (grpo_dataset_load(data, NULL, &ds, &err) != GRPO_OK) goto fail;
        if ((size_t)line > ds->n) { /* line >= 1: grpo_cli_int64 */
            fprintf(stderr, "grpo template: --line %lld: %s has %zu examples\n", (long long)line,
                    data, ds->n);
            goto done;
        }
        grpo_chat_renderer r = {.tpl = tpl, .opt = opt, .format = format};
        if (grpo_example_prompt_text(&ds->examples[line - 1], grpo_chat_render_messages, &r, &out,
                                     &err) != GRPO_OK)
            goto fail;
    } else if (format) {
        fprintf(stderr, "grpo template: --format works with --data (messages with role/content)\n");
        status = 2;
        goto done;
    } else if (grpo_chat_template_render_json(tpl, messages, &opt, &out, &err) != GRPO_OK)
        goto fail;
    fputs(out, stdout);
    status = 0;
    goto done;
fail:
    fprintf(stderr, "grpo template: %s\n", err.message);
done:
    free(out);
    grpo_dataset_free(ds);
    grpo_chat_template_free(tpl);
    for (size_t i = 0; i < n_vars; i++) free(var_names[i]);
    return status;
}
