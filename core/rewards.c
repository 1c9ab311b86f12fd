/* rewards.c — creating the run's reward instances and scoring batches with them. */
#include "rewards.h"

#include <math.h>
#include <stdlib.h>

void grpo_reward_set_free(grpo_reward_set *set) {
    for (int k = 0; k < set->n; k++)
        if (set->states[k]) set->descs[k]->destroy(set->states[k]);
    free(set->specs);
    free(set->descs);
    free(set->states);
    *set = (grpo_reward_set){0};
}

static int reward_create_one(grpo_reward_set *set, int k, grpo_registry *reg,
                             const grpo_host *host, grpo_error *err) {
    const grpo_reward_spec *spec = set->specs[k];
    const void *desc = NULL;
    if (grpo_registry_load(reg, spec->entry, host, &desc, err) != GRPO_OK) return err->status;
    set->descs[k] = desc;
    grpo_config cfg = grpo_reward_spec_config(spec);
    grpo_error inner;
    grpo_error_init(&inner);
    if (set->descs[k]->create(host, &cfg, &set->states[k], &inner) != GRPO_OK) {
        set->states[k] = NULL;
        return grpo_error_set(err, inner.status ? inner.status : GRPO_ERR_INVALID,
                              "[%s] (plugin %s): %s", spec->section, spec->plugin, inner.message);
    }
    return GRPO_OK;
}

int grpo_reward_set_create(grpo_reward_set *set, const grpo_run_config *cfg, grpo_registry *reg,
                           const grpo_host *host, grpo_error *err) {
    int K = cfg->n_rewards;
    *set = (grpo_reward_set){0};
    set->specs = calloc(K ? K : 1, sizeof *set->specs);
    set->descs = calloc(K ? K : 1, sizeof *set->descs);
    set->states = calloc(K ? K : 1, sizeof *set->states);
    if (!set->specs || !set->descs || !set->states) {
        grpo_reward_set_free(set);
        return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory creating %d rewards", K);
    }
    set->n = K;
    for (int k = 0; k < K; k++) set->specs[k] = &cfg->rewards[k];
    for (int k = 0; k < K; k++)
        if (reward_create_one(set, k, reg, host, err) != GRPO_OK) {
            grpo_reward_set_free(set);
            return err->status;
        }
    return GRPO_OK;
}

/* Checks one reward's scores (n): NaN is "no opinion", infinities are a plugin bug. */
static int reward_check_row(const grpo_reward_spec *spec, const grpo_sample *samples, uint32_t n,
                            const float *row, grpo_error *err) {
    for (uint32_t i = 0; i < n; i++)
        if (isinf(row[i]))
            return grpo_error_set(err, GRPO_ERR_INVALID,
                                  "[%s] (plugin %s) returned %g for sample %u (group %u, member %u); "
                                  "expected a finite reward or NaN for no opinion",
                                  spec->section, spec->plugin, row[i], i, samples[i].group,
                                  samples[i].member);
    return GRPO_OK;
}

int grpo_reward_set_score(grpo_reward_set *set, const grpo_sample *samples, uint32_t n, float *R,
                          grpo_error *err) {
    float *row = malloc((n ? n : 1) * sizeof *row);
    if (!row) return grpo_error_set(err, GRPO_ERR_NOMEM, "out of memory scoring %u samples", n);
    int K = set->n, rc = GRPO_OK;
    for (int k = 0; rc == GRPO_OK && k < K; k++) {
        const grpo_reward_spec *spec = set->specs[k];
        grpo_error inner;
        grpo_error_init(&inner);
        if (set->descs[k]->score(set->states[k], samples, n, row, &inner) != GRPO_OK)
            rc = grpo_error_set(err, inner.status ? inner.status : GRPO_ERR_INTERNAL,
                                "[%s] (plugin %s) failed to score: %s", spec->section, spec->plugin,
                                inner.message);
        else rc = reward_check_row(spec, samples, n, row, err);
        for (uint32_t i = 0; rc == GRPO_OK && i < n; i++) R[(size_t)i * K + k] = row[i];
    }
    free(row);
    return rc;
}

void grpo_reward_set_weights(const grpo_reward_set *set, float *w) {
    for (int k = 0; k < set->n; k++) w[k] = (float)set->specs[k]->weight;
}
