// Umbrella header for the differentiable op library.
#pragma once
#include "lb/autograd/grad_mode.h"
#include "lb/autograd/node.h"
#include "lb/core/tensor.h"
#include "lb/ops/attention.h"
#include "lb/ops/conv.h"
#include "lb/ops/elementwise.h"
#include "lb/ops/hadamard.h"
#include "lb/ops/linalg.h"
#include "lb/ops/nn.h"
#include "lb/ops/reduce.h"
#include "lb/ops/shape_ops.h"
