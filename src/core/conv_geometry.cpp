// The output size of a convolution plane, with the argument checks every conv path shares.
#include "lb/core/conv_geometry.h"

#include "lb/core/error.h"

namespace lb::detail {

ConvGeom conv_geom(int64_t H, int64_t W, int64_t kH, int64_t kW, const Conv2dArgs& a,
                   const char* op) {
  LB_CHECK(a.stride[0] > 0 && a.stride[1] > 0, op, ": stride must be positive, got (",
           a.stride[0], ", ", a.stride[1], ")");
  LB_CHECK(a.dilation[0] > 0 && a.dilation[1] > 0, op, ": dilation must be positive, got (",
           a.dilation[0], ", ", a.dilation[1], ")");
  LB_CHECK(a.padding[0] >= 0 && a.padding[1] >= 0, op, ": padding must be non-negative, got (",
           a.padding[0], ", ", a.padding[1], ")");
  LB_CHECK(kH > 0 && kW > 0, op, ": kernel size must be positive, got (", kH, ", ", kW, ")");
  ConvGeom g{H, W, kH, kW, a.stride[0], a.stride[1], a.padding[0], a.padding[1],
             a.dilation[0], a.dilation[1], 0, 0};
  const int64_t ekH = g.dh * (kH - 1) + 1, ekW = g.dw * (kW - 1) + 1;  // dilated extent
  LB_CHECK(H + 2 * g.ph >= ekH && W + 2 * g.pw >= ekW, op, ": kernel (", kH, ", ", kW,
           ") with dilation (", g.dh, ", ", g.dw, ") spans (", ekH, ", ", ekW,
           "), larger than the padded input (", H + 2 * g.ph, ", ", W + 2 * g.pw,
           ") from input (", H, ", ", W, ") and padding (", g.ph, ", ", g.pw, ")");
  g.Ho = (H + 2 * g.ph - ekH) / g.sh + 1;
  g.Wo = (W + 2 * g.pw - ekW) / g.sw + 1;
  return g;
}

}  // namespace lb::detail
