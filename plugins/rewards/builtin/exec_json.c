/* exec_json.c — the exec protocol's request and reward JSON (exec_json.h). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exec_json.h"

cJSON *exec_sample_json(const grpo_sample *x) {
    cJSON *o = cJSON_CreateObject(), *fields = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "prompt", x->prompt ? x->prompt : "");
    cJSON_AddStringToObject(o, "completion", x->completion ? x->completion : "");
    cJSON *ids = cJSON_AddArrayToObject(o, "completion_ids");
    for (uint32_t i = 0; i < x->n_completion_ids; i++)
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(x->completion_ids[i]));
    cJSON_AddNumberToObject(o, "group", x->group);
    cJSON_AddNumberToObject(o, "member", x->member);
    for (uint32_t i = 0; i < x->n_fields; i++)
        cJSON_AddItemToObject(fields, x->fields[i].key, cJSON_CreateRaw(x->fields[i].json));
    cJSON_AddItemToObject(o, "fields", fields);
    return o;
}

char *exec_request_text(uint64_t id, const grpo_sample *samples, uint32_t n, size_t *len) {
    cJSON *req = cJSON_CreateObject();
    cJSON_AddNumberToObject(req, "id", (double)id);
    cJSON *arr = cJSON_AddArrayToObject(req, "samples");
    for (uint32_t k = 0; k < n; k++) cJSON_AddItemToArray(arr, exec_sample_json(&samples[k]));
    char *text = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    char *line = text ? realloc(text, (*len = strlen(text)) + 2) : NULL;
    if (!line) return free(text), NULL;
    line[(*len)++] = '\n', line[*len] = 0;
    return line;
}

int exec_rewards_take(const cJSON *r, uint32_t n, float *out, char *warn, size_t warn_size) {
    warn[0] = 0;
    if (!cJSON_IsArray(r) || (uint32_t)cJSON_GetArraySize(r) != n) return -1;
    uint32_t k = 0, bad = 0, first = 0;
    double first_value = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, r) {
        if (cJSON_IsNull(v)) {
            out[k++] = NAN;
            continue;
        }
        if (!cJSON_IsNumber(v)) return -1;
        double d = v->valuedouble;
        int ok = isfinite(d) && fabs(d) <= FLT_MAX;
        if (!ok && !bad++) first = k, first_value = d;
        out[k++] = ok ? (float)d : NAN;
    }
    if (bad)
        snprintf(warn, warn_size, "%u of %u rewards are not finite floats (sample %u: %g); they "
                 "score NaN", bad, n, first, first_value);
    return 0;
}
