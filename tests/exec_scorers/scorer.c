/*
 * scorer.c — a test scorer for builtin.exec, behaving as argv[1] says:
 *   good   reward = length of the completion, null for member 1 ("no opinion")
 *   crash  answers the first batch like good, then exits without replying
 *   hang   reads batches and never replies
 *   junk   replies with a line that is not the protocol
 * A batch whose first completion is "die" makes any mode exit at once.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void reply_good(cJSON *samples) {
    cJSON *out = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(out, "rewards");
    cJSON *s;
    cJSON_ArrayForEach(s, samples) {
        const char *c = cJSON_GetObjectItem(s, "completion")->valuestring;
        if (cJSON_GetObjectItem(s, "member")->valueint == 1) cJSON_AddItemToArray(arr, cJSON_CreateNull());
        else cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)strlen(c)));
    }
    char *text = cJSON_PrintUnformatted(out);
    printf("%s\n", text);
    fflush(stdout);
    free(text);
    cJSON_Delete(out);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "good";
    char *line = NULL;
    size_t cap = 0;
    for (int batch = 0; getline(&line, &cap, stdin) > 0; batch++) {
        cJSON *req = cJSON_Parse(line), *samples = cJSON_GetObjectItem(req, "samples");
        cJSON *first = cJSON_GetArrayItem(samples, 0);
        if (first && !strcmp(cJSON_GetObjectItem(first, "completion")->valuestring, "die")) return 3;
        if (!strcmp(mode, "hang")) pause();
        if (!strcmp(mode, "crash") && batch > 0) return 1;
        if (!strcmp(mode, "junk")) {
            puts("hello");
            fflush(stdout);
        } else reply_good(samples);
        cJSON_Delete(req);
    }
    free(line);
    return 0;
}
