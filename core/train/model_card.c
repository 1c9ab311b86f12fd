/* model_card.c — the README.md of a saved model (see model_card.h). */
#include "train/model_card.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GRPO_VERSION
#define GRPO_VERSION "dev"
#endif

/* s as a double-quoted string: JSON's escapes are YAML's too. */
static void put_quoted(FILE *f, const char *s) {
    cJSON *j = cJSON_CreateString(s ? s : "");
    char *q = j ? cJSON_PrintUnformatted(j) : NULL;
    fputs(q ? q : "\"\"", f);
    free(q);
    cJSON_Delete(j);
}

/* A LoRA run's directory is a PEFT adapter: the Hub's front matter says peft and lora. */
static void front_matter(FILE *f, const char *base_model, grpo_card_method method, int lora) {
    fprintf(f, "---\nlibrary_name: %s\nbase_model: ", lora ? "peft" : "grpo");
    put_quoted(f, base_model);
    fprintf(f, "\ntags:\n- grpo\n- %s\n%spipeline_tag: text-generation\n---\n\n",
            method == GRPO_CARD_GRPO ? "reinforcement-learning" : "sft", lora ? "- lora\n" : "");
}

/* The adapters' settings, and how to load them. */
static void lora_line(FILE *f, const grpo_run_config *cfg, const char *base_model) {
    if (cfg->lora_r <= 0) return;
    fprintf(f, "LoRA adapters (PEFT's format) on the frozen base: r %lld, lora_alpha %g%s, "
               "target_modules %s; the reference model is the base with the adapters off. Load "
               "with `PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(\"%s\"), "
               "<this directory>)`, or merge with `grpo merge-lora`.\n\n",
            cfg->lora_r, cfg->lora_alpha, cfg->lora_use_rslora ? " (rsLoRA)" : "",
            cfg->lora_target_modules, base_model);
}

static void method_section(FILE *f, const grpo_run_config *cfg, grpo_card_method method) {
    fputs("## Method\n\n", f);
    if (method == GRPO_CARD_SFT) {
        fprintf(f, "Supervised fine-tuning (`grpo sft`): next-token loss on the responses, lr %g, "
                   "%lld prompts per batch x %lld accumulation steps.\n\n",
                cfg->optim_lr, cfg->train_batch_prompts, cfg->train_grad_accum);
        return;
    }
    fprintf(f, "GRPO (`grpo train`): %lld completions per prompt, %lld prompts per step, "
               "loss_type %s, beta %g (k3 KL to the reference), epsilon %g/%g, "
               "scale_rewards %s, num_iterations %lld, lr %g, temperature %g.\n\n",
            cfg->sampling_num_generations, cfg->train_batch_prompts,
            grpo_choices_loss_type[cfg->grpo_loss_type], cfg->grpo_beta, cfg->grpo_epsilon_low,
            cfg->grpo_epsilon_high, grpo_choices_scale_rewards[cfg->grpo_scale_rewards],
            cfg->grpo_num_iterations, cfg->optim_lr, cfg->sampling_temperature);
}

static void rewards_section(FILE *f, const grpo_run_config *cfg) {
    if (!cfg->n_rewards) return;
    fputs("## Rewards\n\n| reward | weight | plugin | pack |\n| --- | --- | --- | --- |\n", f);
    for (int k = 0; k < cfg->n_rewards; k++) {
        const grpo_reward_spec *r = &cfg->rewards[k];
        const grpo_pack *p = r->entry ? r->entry->pack : NULL;
        fprintf(f, "| %s | %g | `%s` | %s %s |\n", r->name, r->weight, r->plugin,
                p ? p->name : "?", p ? p->version : "");
    }
    fputc('\n', f);
}

static void metrics_section(FILE *f, long step, const grpo_metric_row *last) {
    if (!last || last->n == 0) return;
    fprintf(f, "## Metrics at step %ld\n\n| metric | value |\n| --- | --- |\n", step);
    for (int i = 0; i < last->n; i++)
        if (isnan(last->values[i])) fprintf(f, "| %s | - |\n", last->names[i]);
        else fprintf(f, "| %s | %.6g |\n", last->names[i], last->values[i]);
    fputc('\n', f);
}

char *grpo_model_card(const grpo_run_config *cfg, const char *base_model, grpo_card_method method,
                      long step, const grpo_metric_row *last) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    front_matter(f, base_model, method, cfg->lora_r > 0);
    fprintf(f, "# %s of `%s`, step %ld\n\n",
            method == GRPO_CARD_GRPO ? "GRPO training" : "Supervised fine-tuning", base_model,
            step);
    fprintf(f, "Trained with grpo %s from `%s` for %ld of %lld steps on `%s`%s%s%s.\n\n",
            GRPO_VERSION, base_model, step, cfg->train_steps, cfg->data_path,
            cfg->data_eval_path[0] ? " (evaluation: `" : "", cfg->data_eval_path,
            cfg->data_eval_path[0] ? "`)" : "");
    method_section(f, cfg, method);
    lora_line(f, cfg, base_model);
    rewards_section(f, cfg);
    metrics_section(f, step, last);
    fputs("## Run file\n\nThe run file as this run resolved it (`grpo config check` prints the "
          "same):\n\n```ini\n", f);
    int bad = grpo_run_config_dump(cfg, f) != 0;
    fputs("```\n", f);
    if ((fclose(f) != 0) | bad) {
        free(text);
        return NULL;
    }
    return text;
}
