// The row kernels of training attention on CUDA, which attention_cuda.h composes with cuBLASLt
// products: the masked softmax over the scores, its backward, and the attention-dropout mask of
// kernels/cpu/attention_cpu.h bit for bit. The arrays are [B, h, Tq, Tk] f32 on the device: row
// r = (b * h + head) * Tq + t, element r * Tk + j, which is also the element's dropout index. The
// mask's key lengths are a device pointer. Queued on cuda::stream().
#pragma once

#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cuda {

// In place over probs: the scores S become P = softmax over each row's visible keys, 0 on the
// masked ones (a row without a visible key, which the op's checks rule out, becomes 0 as on the
// CPU). dropped (nullptr: not needed) receives D = P * keep / (1 - p).
void attention_softmax(const kernels::AttentionDims& dims, const kernels::AttentionMaskSpec& mask,
                       const kernels::AttentionDropout& dropout, float* probs, float* dropped);

// dropped = P * keep / (1 - p): the forward's D again, from P and the seed.
void attention_dropout(const kernels::AttentionDims& dims, const kernels::AttentionDropout& dropout,
                       const float* probs, float* dropped);

// In place over grad: dD becomes dS = alpha * P * (dP - sum_j dP_j P_j) with dP = dD * keep / (1 -
// p) (dropout's backward), 0 on masked keys. alpha = 1/sqrt(dk) folds the scale of the scores in.
void attention_softmax_backward(const kernels::AttentionDims& dims,
                                const kernels::AttentionMaskSpec& mask,
                                const kernels::AttentionDropout& dropout, float alpha,
                                const float* probs, float* grad);

}  // namespace tfm::internal::cuda
