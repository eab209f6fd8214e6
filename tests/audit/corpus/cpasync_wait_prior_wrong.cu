// expect: cp-async at line 17
// argus: block-dim 128
// argus: size in = 1024 * grid_dim.x
// argus: size out = 512 * grid_dim.x
#include <cuda_pipeline.h>
__global__ void cpasync_wait1(const float *in, float *out) {
  __shared__ __align__(16) float a[512];
  __shared__ __align__(16) float b[512];
  int t = threadIdx.x;
  const float *src = in + blockIdx.x * 1024;
  __pipeline_memcpy_async(&a[4 * t], &src[4 * t], 16);
  __pipeline_commit();
  __pipeline_memcpy_async(&b[4 * t], &src[512 + 4 * t], 16);
  __pipeline_commit();
  __pipeline_wait_prior(1);
  __syncthreads();
  out[blockIdx.x * 512 + t] = a[4 * t] + b[4 * t];
}
