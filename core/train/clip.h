/*
 * clip.h — gradient clipping by global norm, the arithmetic of torch.nn.utils.clip_grad_norm_
 * (norm_type 2, error_if_nonfinite False):
 *
 *   total_norm = sqrt( sum over tensors of sum(g^2) )      (= the 2-norm of the per-tensor norms)
 *   coef       = min(1, max_norm / (total_norm + 1e-6))
 *   g         *= coef                                      (torch multiplies even when coef is 1)
 *
 * The sums of squares are per tensor so that a caller holding gradients in several buffers (or on
 * a device that reduces them) can combine them here. Sums are in double (torch sums in the
 * gradient's dtype, so fp32 results agree to ~1e-6 relative). A non-finite total norm gives coef
 * NaN or 0 as in torch; callers that want to skip such a step test isfinite(total_norm) first.
 */
#ifndef GRPO_CLIP_H
#define GRPO_CLIP_H

#include <stddef.h>

#define GRPO_CLIP_EPS 1e-6 /* torch's clip_grad_norm_: max_norm / (total_norm + 1e-6) */

/* sqrt of the sum of sumsq[n_tensors]. */
double grpo_grad_total_norm(const double *sumsq, int n_tensors);

/* min(1, max_norm / (total_norm + 1e-6)). max_norm <= 0 means "no clipping": returns 1. */
double grpo_grad_clip_coef(double total_norm, double max_norm);

#endif
