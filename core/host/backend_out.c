/* backend_out.c — a tensor in backend memory as a tensor to write (see backend_out.h). */
#include "host/backend_out.h"

#include "kernels.h"

/* grpo_st_reader: the source downloaded into the writer's buffer. */
static int download_src(void *ctx, float *buf, grpo_error *err) {
    const grpo_backend_src *s = ctx;
    (void)err;
    s->ops->download(s->ops->ctx, buf, s->p, s->numel * sizeof(float));
    return GRPO_OK;
}

void grpo_backend_out(grpo_st_out *o, grpo_backend_src *src, const grpo_ops *ops, const float *p,
                      uint64_t numel) {
    *src = (grpo_backend_src){ops, p, numel};
    o->data = grpo_backend_host_memory(ops) ? p : NULL;
    o->read = o->data ? NULL : download_src;
    o->ctx = o->data ? NULL : src;
}
