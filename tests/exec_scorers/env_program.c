/*
 * env_program.c — a test environment program for builtin.exec_env (sdk/EXEC_PROTOCOL.md),
 * behaving as argv[1] says:
 *   good   reset: observation "[E]" (E the episode number); step: turn 0 gets "<obs>", turn 1
 *          is done with a step reward 0.25; final: reward = member + 1
 *   crash  like good, but exits at its first step request
 *   hang   like good, but never replies to a step
 *   junk   like good, but replies to a step with a line that is not JSON
 *   badkey like good, but a step's reply says "done": "yes"
 *   mute   never replies to anything (every exchange times out)
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int member[4096]; /* member of each episode number (for final) */

static void send_obj(cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    printf("%s\n", s);
    fflush(stdout);
    free(s);
    cJSON_Delete(o);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "good";
    char line[1 << 16];
    while (fgets(line, sizeof line, stdin)) {
        cJSON *req = cJSON_Parse(line), *out = cJSON_CreateObject();
        double id = cJSON_GetObjectItem(req, "id")->valuedouble;
        int ep = (int)cJSON_GetObjectItem(req, "episode")->valuedouble % 4096;
        const char *type = cJSON_GetObjectItem(req, "type")->valuestring;
        if (!strcmp(mode, "mute")) {
            sleep(100);
            return 0;
        }
        cJSON_AddNumberToObject(out, "id", id);
        if (!strcmp(type, "reset")) {
            cJSON *s = cJSON_GetObjectItem(req, "sample");
            member[ep] = (int)cJSON_GetObjectItem(s, "member")->valuedouble;
            char obs[32];
            snprintf(obs, sizeof obs, "[%d]", ep);
            cJSON_AddStringToObject(out, "observation", obs);
        } else if (!strcmp(type, "step")) {
            if (!strcmp(mode, "crash")) {
                cJSON_Delete(out), cJSON_Delete(req);
                return 3;
            }
            if (!strcmp(mode, "hang")) {
                sleep(100);
                return 0;
            }
            if (!strcmp(mode, "junk")) {
                printf("this is not json\n");
                fflush(stdout);
                cJSON_Delete(out), cJSON_Delete(req);
                continue;
            }
            int turn = (int)cJSON_GetObjectItem(req, "turn")->valuedouble;
            cJSON_AddStringToObject(out, "observation", "<obs>");
            if (!strcmp(mode, "badkey")) cJSON_AddStringToObject(out, "done", "yes");
            else cJSON_AddBoolToObject(out, "done", turn >= 1);
            cJSON_AddNumberToObject(out, "reward", turn >= 1 ? 0.25 : 0);
            cJSON_AddNumberToObject(out, "tool_calls", 1);
        } else { /* final */
            cJSON_AddNumberToObject(out, "reward", member[ep] + 1);
        }
        send_obj(out);
        cJSON_Delete(req);
    }
    return 0;
}
