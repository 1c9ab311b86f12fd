// cxx_pack.cpp — a reward pack written in C++: the SDK headers compile as C++, GRPO_EXPORT gives
// the two entry points C linkage, and a C++ exception never crosses the ABI (caught in score).
// Same manifest as test_plugin.c (pack "tp", rewards tp.a and tp.b); scores are completion lengths.
#include "grpo/grpo.h"

#include <stdexcept>
#include <string>

GRPO_PLUGIN_MAGIC()

namespace {

struct LengthReward {
    std::string id;
};

int32_t create(const grpo_host *, const grpo_config *cfg, void **state, grpo_error *) {
    *state = new LengthReward{cfg && cfg->section ? cfg->section : ""};
    return GRPO_OK;
}

int32_t score(void *, const grpo_sample *samples, uint32_t n, float *out, grpo_error *err) {
    try {
        for (uint32_t i = 0; i < n; i++) {
            if (!samples[i].completion) throw std::invalid_argument("sample without completion");
            out[i] = static_cast<float>(std::string(samples[i].completion).size());
        }
        return GRPO_OK;
    } catch (const std::exception &e) {
        return grpo_error_set(err, GRPO_ERR_INVALID, "%s", e.what());
    }
}

void destroy(void *state) { delete static_cast<LengthReward *>(state); }

const grpo_reward_desc rewards[] = {
    {sizeof(grpo_reward_desc), "tp.a", "completion length (C++)", GRPO_REWARD_THREADSAFE, create,
     score, destroy},
    {sizeof(grpo_reward_desc), "tp.b", "completion length again (C++)", GRPO_REWARD_THREADSAFE,
     create, score, destroy},
};

const grpo_reward_desc *get_reward(uint32_t i) { return i < 2 ? &rewards[i] : nullptr; }

} // namespace

GRPO_EXPORT int32_t grpo_plugin_init(const grpo_host *, grpo_library *lib, grpo_error *) {
    lib->get_reward = get_reward;
    return GRPO_OK;
}
