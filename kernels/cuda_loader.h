/* cuda_loader.h — the cuda entry of the backend registry (backend_registry.c): the CUDA backend
 * is a module loaded with dlopen (kernels.h says where it is looked for). */
#ifndef GRPO_CUDA_LOADER_H
#define GRPO_CUDA_LOADER_H

#include "kernels.h"

/* 1 when a module file is found where kernels.h says (it may still fail to open: no device). */
int cuda_module_probe(const grpo_backend_options *opt);
/* Loads the module and opens a table on device 0; NULL with err set. */
grpo_ops *cuda_module_open(const grpo_backend_options *opt, grpo_error *err);
/* Closes ops if the module opened it (the module stays mapped); 0 when it is not its table. */
int cuda_module_close(grpo_ops *ops);

#endif
