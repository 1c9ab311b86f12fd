# The pieces shared by the decoder packs (dense, moe), compiled into each pack that includes this
# file: LM_COMMON_SOURCES to add to its SOURCES, LM_COMMON_DIR to its include directories. They
# use the SDK headers and the system cJSON (lm_json.c) only.
set(LM_COMMON_DIR ${CMAKE_CURRENT_LIST_DIR})
set(LM_COMMON_SOURCES
  ${LM_COMMON_DIR}/lm_decoder.c # the decoder skeleton: layer loops, embedding, norm, head
  ${LM_COMMON_DIR}/lm_attn.c    # the pre-norm attention block: params, forward, backward, decode
  ${LM_COMMON_DIR}/lm_prefix.c  # the token layout of a pass, shared prompts (grpo_batch 1.6)
  ${LM_COMMON_DIR}/lm_json.c    # config.json readers
  ${LM_COMMON_DIR}/lm_params.c  # the parameter table
  ${LM_COMMON_DIR}/lm_infer.c   # KV cache layout, prefill/decode checks, last-position logits
  ${LM_COMMON_DIR}/lm_linear.c  # the linear layers by weight dtype (bind_typed), with LoRA
  ${LM_COMMON_DIR}/lm_lora.c    # LoRA adapters on the linear layers (set_lora)
  ${LM_COMMON_DIR}/lm_host.c)   # the host check of create()
