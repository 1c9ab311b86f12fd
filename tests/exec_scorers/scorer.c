/*
 * scorer.c — a test scorer for builtin.exec (sdk/EXEC_PROTOCOL.md), behaving as argv[1] says:
 *   good     reward = length of the completion, null for member 1 ("no opinion")
 *   crash    answers the first batch like good, then exits without replying
 *   hang     reads batches and never replies
 *   deaf     never reads stdin at all (and never replies)
 *   junk     replies with a line that is not the protocol
 *   noid     replies like good but without the request's id (the protocol before ids)
 *   twice    replies like good, twice to every request
 *   wrongid  replies like good, to an id no request had
 *   huge     replies 1e999, 1e39, -1e999 for the first three samples (as written, out of float
 *            range), then like good
 *   fds      reward = how many file descriptors above stderr it inherited
 * With argv[2] = PIDFILE it first starts a helper process that sleeps forever and writes the
 * helper's pid there: the helper must die with the scorer's process group.
 * A batch whose first completion is "die" makes any mode exit at once.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* File descriptors open above stderr, not counting the one listing them. */
static int inherited_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.' && atoi(e->d_name) > 2 && atoi(e->d_name) != dirfd(d)) n++;
    if (d) closedir(d);
    return n;
}

static void reply(double id, cJSON *samples, const char *mode) {
    cJSON *out = cJSON_CreateObject();
    if (strcmp(mode, "noid")) cJSON_AddNumberToObject(out, "id", strcmp(mode, "wrongid") ? id : id + 1000);
    cJSON *arr = cJSON_AddArrayToObject(out, "rewards"), *s;
    int fds = strcmp(mode, "fds") ? -1 : inherited_fds();
    cJSON_ArrayForEach(s, samples) {
        const char *c = cJSON_GetObjectItem(s, "completion")->valuestring;
        if (fds >= 0) cJSON_AddItemToArray(arr, cJSON_CreateNumber(fds));
        else if (cJSON_GetObjectItem(s, "member")->valueint == 1) cJSON_AddItemToArray(arr, cJSON_CreateNull());
        else cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)strlen(c)));
    }
    char *text = cJSON_PrintUnformatted(out);
    if (!strcmp(mode, "huge")) { /* cJSON would print infinities as null: write the text itself */
        const char *big[] = {"1e999", "1e39", "-1e999"};
        printf("{\"id\":%.17g,\"rewards\":[", id);
        for (int k = 0; k < cJSON_GetArraySize(arr); k++) {
            char *v = cJSON_PrintUnformatted(cJSON_GetArrayItem(arr, k));
            printf("%s%s", k ? "," : "", k < 3 ? big[k] : v);
            free(v);
        }
        printf("]}\n");
    } else printf("%s\n", text);
    if (!strcmp(mode, "twice")) printf("%s\n", text);
    fflush(stdout);
    free(text);
    cJSON_Delete(out);
}

/* Starts a helper that sleeps until killed and records its pid in path. */
static void start_helper(const char *path) {
    pid_t pid = fork();
    if (pid == 0) {
        for (;;) pause();
    }
    FILE *f = fopen(path, "w");
    if (f) fprintf(f, "%d\n", (int)pid), fclose(f);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "good";
    if (argc > 2) start_helper(argv[2]);
    if (!strcmp(mode, "deaf"))
        for (;;) pause();
    char *line = NULL;
    size_t cap = 0;
    for (int batch = 0; getline(&line, &cap, stdin) > 0; batch++) {
        cJSON *req = cJSON_Parse(line), *samples = cJSON_GetObjectItem(req, "samples");
        cJSON *first = cJSON_GetArrayItem(samples, 0);
        int die = first && !strcmp(cJSON_GetObjectItem(first, "completion")->valuestring, "die");
        if (die || (!strcmp(mode, "crash") && batch > 0)) { /* exits without replying */
            cJSON_Delete(req);
            free(line);
            return die ? 3 : 1;
        }
        if (!strcmp(mode, "hang"))
            for (;;) pause();
        if (!strcmp(mode, "junk")) {
            puts("hello");
            fflush(stdout);
        } else reply(cJSON_GetObjectItem(req, "id")->valuedouble, samples, mode);
        cJSON_Delete(req);
    }
    free(line);
    return 0;
}
