// A convolution's token view on CUDA (src/backend/conv_tokens.h): the generic versions — a
// gather by index map and its scatter-add (the index_select kernels), a strided copy.
#include "src/backend/conv_tokens.h"

namespace lb::backend {

const ConvTokenKernels kCudaConvTokens{generic_conv_tokens::to_tokens, generic_conv_tokens::from_tokens,
                                       generic_conv_tokens::transpose_last2};

}  // namespace lb::backend
