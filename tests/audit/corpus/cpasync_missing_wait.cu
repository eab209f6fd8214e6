// expect: cp-async at line 13
// argus: block-dim 128
// argus: size in = 512 * grid_dim.x
// argus: size out = 512 * grid_dim.x
#include <cuda_pipeline.h>
__global__ void cpasync_nowait(const float *in, float *out) {
  __shared__ __align__(16) float s[512];
  int t = threadIdx.x;
  const float *src = in + blockIdx.x * 512;
  __pipeline_memcpy_async(&s[4 * t], &src[4 * t], 16);
  __pipeline_commit();
  __syncthreads();
  out[blockIdx.x * 512 + t] = s[4 * t];
}
